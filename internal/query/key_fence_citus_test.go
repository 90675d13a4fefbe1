//go:build citus

package query

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

)

// TestCitusOperateFencesOnTheIntent is TestOperateFencesOnTheIntent in the
// distributed mode (operate_bucket.sql).
func TestCitusOperateFencesOnTheIntent(t *testing.T) {
	pool := citusDB(t)
	ctx := context.Background()
	for _, s := range []string{
		`INSERT INTO effectd.channels (name, provider) VALUES ('sms', 'twilio')`,
		`INSERT INTO effectd.intents (bucket, id, event_id, channel, payload, idempotency_key, status, attempts)
		 OVERRIDING SYSTEM VALUE VALUES (5, 7, 'new', 'sms', '{}', 'sms:new', 'PENDING', 0)`,
	} {
		if _, err := pool.Exec(ctx, s); err != nil {
			t.Fatal(err)
		}
	}
	tr := Transition{IntentID: 7, Key: "sms:lost", From: "PENDING", Attempts: 0, To: "CANCELLED"}
	if after, err := Operate(ctx, pool, effectdtype.Citus, tr); !errors.Is(err, pgx.ErrNoRows) {
		t.Fatalf("another intent's transition: %s, %v; want no row", after.Status, err)
	}
	tr.Key = "sms:new"
	if after, err := Operate(ctx, pool, effectdtype.Citus, tr); err != nil || after.Status != "CANCELLED" {
		t.Fatalf("its own transition: %s, %v", after.Status, err)
	}
}
