package dispatcher_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/dispatcher"
)

// An order is cancelled before its SMS goes out: the order's row and the
// intent change in one transaction. An SMS already on its way is left alone,
// and the answer says so.
func ExampleCancel() {
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
	// ... UPDATE orders SET state = 'cancelled' WHERE id = $1 ...
	status, err := dispatcher.Cancel(ctx, tx, dispatcher.IntentKey{EventID: "order-1042:confirmation", Channel: "sms"}, "order cancelled by the customer")
	switch {
	case errors.Is(err, dispatcher.ErrNotFound):
		log.Print("no SMS was recorded for this order")
	case err != nil:
		log.Fatal(err)
	case status != "CANCELLED":
		log.Printf("too late: the SMS is %s", status) // SENDING, IN_DOUBT, SENT…
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}
}

// A support tool shows where a refund stands.
func ExampleStatus() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://support@db/app")
	if err != nil {
		log.Fatal(err)
	}
	s, err := dispatcher.Status(ctx, pool, dispatcher.IntentKey{EventID: "refund-77", Channel: "refund"})
	if err != nil {
		log.Fatal(err)
	}
	switch s.Status {
	case "PENDING":
		fmt.Println("refund pending, next try at", s.NextAttemptAt)
	case "IN_DOUBT":
		fmt.Println("refund in doubt: effectd is asking Stripe")
	case "SENT":
		fmt.Println("refund sent:", s.ProviderRef)
	default:
		fmt.Println("refund", s.Status, s.LastErrorClass)
	}
}

// A settlement job records its payouts in the transaction that settles them:
// all of them, or none when one is invalid.
func ExampleEnqueueMany() {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "postgres://payments@db/app")
	if err != nil {
		log.Fatal(err)
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var payouts []dispatcher.Intent
	for _, p := range []struct {
		id     string
		amount int
	}{{"po_1", 1200}, {"po_2", 800}} {
		payouts = append(payouts, dispatcher.Intent{EventID: p.id, Channel: "payout",
			Payload: map[string]any{"type": "transfer", "destination": "acct_1", "amount": p.amount, "currency": "eur"}})
	}
	results, err := dispatcher.EnqueueMany(ctx, tx, payouts, dispatcher.BatchOptions{})
	var bad *dispatcher.BatchError
	if errors.As(err, &bad) {
		for _, r := range bad.Rows {
			log.Printf("payout %s: %s", payouts[r.Index].EventID, r.Message) // nothing was recorded
		}
		return
	}
	if err != nil {
		log.Fatal(err)
	}
	for i, r := range results {
		if r.Outcome == dispatcher.BatchDuplicate {
			log.Printf("payout %s was recorded before", payouts[i].EventID)
		}
	}
	if err := tx.Commit(ctx); err != nil {
		log.Fatal(err)
	}
}
