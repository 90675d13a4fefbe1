//go:build citus

package intentdb

import (
	"context"
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/internal/fixture"
)

// TestCitusOperateFencesOnTheIntent is TestOperateFencesOnTheIntent in the
// distributed mode (operate_bucket.sql).
func TestCitusOperateFencesOnTheIntent(t *testing.T) {
	pool := citusDB(t)
	ctx := context.Background()
	fixture.AddChannel(t, pool, "sms", "twilio")
	fixture.Intent(t, pool, fixture.Bucket(5), fixture.ID(7), fixture.Event("new"), fixture.Channel("sms"))
	tr := Transition{IntentID: 7, Key: "sms:lost", From: "PENDING", Attempts: 0, To: "CANCELLED"}
	if after, err := OperateBucket(ctx, pool, tr); !errors.Is(err, pgx.ErrNoRows) {
		t.Fatalf("another intent's transition: %s, %v; want no row", after.Status, err)
	}
	tr.Key = "sms:new"
	if after, err := OperateBucket(ctx, pool, tr); err != nil || after.Status != "CANCELLED" {
		t.Fatalf("its own transition: %s, %v", after.Status, err)
	}
}
