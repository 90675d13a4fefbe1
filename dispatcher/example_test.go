package dispatcher_test

import (
	"context"
	"database/sql"
	"errors"
	"log"

	"github.com/jackc/pgx/v5/pgxpool"
	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver

	"github.com/effectd/effectd/dispatcher"
)

// A consumer handles a broker event and records the SMS it must send in the
// same transaction. A redelivery of the event inserts nothing.
func ExampleEnqueue() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://app@db/app")
	if err != nil {
		log.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback(ctx)
	// ... the consumer's own writes for this event ...
	inserted, err := dispatcher.Enqueue(ctx, tx, dispatcher.Intent{
		EventID: "evt_8Jx2",
		Channel: "sms",
		Payload: map[string]any{"to": "+15005550006", "body": "Your code is 123456"},
	})
	var bad *dispatcher.InputError
	if errors.As(err, &bad) {
		log.Printf("refused: %s (%s)", bad.Message, bad.Field) // nothing was inserted
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	if !inserted {
		log.Print("a redelivery: the intent already exists")
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}
}

// With database/sql, wrap the transaction in SQLTx.
func ExampleSQLTx() {
	ctx := context.Background()
	db, err := sql.Open("pgx", "postgres://app@db/app")
	if err != nil {
		log.Fatal(err)
	}
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback()
	if _, err := dispatcher.Enqueue(ctx, dispatcher.SQLTx{Tx: tx}, dispatcher.Intent{
		EventID: "evt_8Jx2", Channel: "refund",
		Payload: `{"type":"refund","payment_intent":"pi_3Mtw","amount":500}`,
	}); err != nil {
		log.Fatal(err)
	}
	tx.Commit()
}
