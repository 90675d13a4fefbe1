package migrations_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/migrations"
	"github.com/effectd/effectd/policy"
)

// TestRetentionFromOnePlace: effectd.enqueue refuses an occurred_at older than
// the channel's effective retention: the admin API's override, else the
// registered policy, else the default that migrations.Up copies from package
// policy (no default is spelled in SQL: changing the stored one changes what
// enqueue refuses, and Up writes package policy's back).
func TestRetentionFromOnePlace(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	ctx := context.Background()
	var stored time.Duration
	if err := pool.QueryRow(ctx, `SELECT retention FROM effectd.policy_defaults`).Scan(&stored); err != nil || stored != policy.DefaultRetention.D() {
		t.Fatalf("effectd.policy_defaults.retention = %s, %v; want policy.DefaultRetention %s", stored, err, policy.DefaultRetention)
	}
	if _, err := pool.Exec(ctx, `INSERT INTO effectd.channels (name, provider, policy, policy_override) VALUES
		('bare', 'webhook', '{}', '{}'),
		('registered', 'webhook', '{"retention": "2h0m0s"}', '{}'),
		('overridden', 'webhook', '{"retention": "2h0m0s"}', '{"retention": "5h0m0s"}'),
		('shortened', 'webhook', '{"retention": "5h0m0s"}', '{"retention": "2h0m0s"}')`); err != nil {
		t.Fatal(err)
	}
	n := 0
	check := func(channel string, age time.Duration, refused bool) {
		t.Helper()
		n++
		var inserted bool
		err := pool.QueryRow(ctx, `SELECT effectd.enqueue(event_id => $1, channel => $2, payload => '{}', occurred_at => now() - $3::interval)`,
			fmt.Sprint("e", n), channel, fmt.Sprintf("%d seconds", int64(age.Seconds()))).Scan(&inserted)
		code, msg := sqlState(err)
		switch {
		case refused && (code != "22023" || !strings.Contains(msg, "occurred_at")):
			t.Errorf("%s, occurred %s ago: %s %q; want 22023 naming occurred_at", channel, age, code, msg)
		case !refused && (err != nil || !inserted):
			t.Errorf("%s, occurred %s ago: inserted %v, %s %q; want it inserted", channel, age, inserted, code, msg)
		}
		// enqueue_many reads the same retention, in its fast check of every
		// row and in the check that names the field
		var outcome, field string
		err = pool.QueryRow(ctx, `SELECT outcome, coalesce(field, '') FROM effectd.enqueue_many(ARRAY[ROW($1, $2, '{}'::jsonb,
			now() - $3::interval, NULL, NULL)::effectd.new_intent], keep_valid => true)`,
			fmt.Sprint("many", n), channel, fmt.Sprintf("%d seconds", int64(age.Seconds()))).Scan(&outcome, &field)
		switch {
		case err != nil:
			t.Errorf("%s, occurred %s ago, enqueue_many: %v", channel, age, err)
		case refused && (outcome != "invalid" || field != "occurred_at"):
			t.Errorf("%s, occurred %s ago, enqueue_many: %s %q; want invalid, naming occurred_at", channel, age, outcome, field)
		case !refused && outcome != "new":
			t.Errorf("%s, occurred %s ago, enqueue_many: %s %q; want new", channel, age, outcome, field)
		}
	}
	def := policy.DefaultRetention.D()
	check("bare", def-time.Minute, false)
	check("bare", def+time.Minute, true)
	check("registered", 2*time.Hour-time.Minute, false)
	check("registered", 2*time.Hour+time.Minute, true)
	check("overridden", 5*time.Hour-time.Minute, false)
	check("overridden", 5*time.Hour+time.Minute, true)
	check("shortened", 2*time.Hour-time.Minute, false)
	check("shortened", 2*time.Hour+time.Minute, true)

	if _, err := pool.Exec(ctx, `UPDATE effectd.policy_defaults SET retention = '3 hours'`); err != nil {
		t.Fatal(err)
	}
	check("bare", 3*time.Hour+time.Minute, true)
	if err := migrations.New(pool).Up(ctx); err != nil {
		t.Fatal(err)
	}
	check("bare", 3*time.Hour+time.Minute, false)
}
