package migrations_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/effectd/effectd/internal/pgtest"
)

// BenchmarkRollMinutes times one completion statement of a batch of rows
// (SENDING → SENT, the UPDATE a completer runs) with the minute-rollup
// trigger, on one connection whose first completion was of a single row, so
// that PL/pgSQL planned and kept roll_minutes' INSERT for one row; it
// reports the statement's time per row. Rows are made and claimed outside the
// timer. With trigger=off the same statements run with roll_minutes disabled:
// the difference is the trigger's own cost. `go test -run '^$' -bench BenchmarkRollMinutes ./migrations/`.
func BenchmarkRollMinutes(b *testing.B) {
	for _, c := range []struct {
		rows    int
		trigger bool
	}{{1, true}, {16, true}, {256, true}, {1, false}, {16, false}, {256, false}} {
		rows := c.rows
		b.Run(fmt.Sprintf("rows=%d/trigger=%v", rows, map[bool]string{true: "on", false: "off"}[c.trigger]), func(b *testing.B) {
			ctx := context.Background()
			pool := pgtest.New(b)
			conn, err := pool.Acquire(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Release()
			exec := func(q string, args ...any) {
				if _, err := conn.Exec(ctx, q, args...); err != nil {
					b.Fatalf("%v\n%s", err, q)
				}
			}
			exec(`INSERT INTO effectd.channels (name, provider) VALUES ('sms', 'twilio')`)
			if !c.trigger {
				exec(`ALTER TABLE effectd.intents DISABLE TRIGGER intents_roll_minutes`)
			}
			made := 0
			batch := func(n int) {
				exec(`INSERT INTO effectd.intents (event_id, channel, payload, idempotency_key)
					SELECT 'e' || g, 'sms', '{}', 'k' || g FROM generate_series($1::int + 1, $1::int + $2::int) AS g`, made, n)
				made += n
				exec(`UPDATE effectd.intents SET status = 'SENDING', attempts = attempts + 1, claimed_at = now(),
					lease_expires_at = now() + interval '1 minute' WHERE status = 'PENDING'`)
			}
			complete := `UPDATE effectd.intents SET status = 'SENT', lease_expires_at = NULL WHERE status = 'SENDING'`
			batch(1)
			exec(complete) // the first firing: roll_minutes' INSERT planned for one row
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				batch(rows)
				b.StartTimer()
				exec(complete)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*rows), "µs/row")
		})
	}
}
