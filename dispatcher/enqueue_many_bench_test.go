package dispatcher_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/dispatcher"
)

// BenchmarkEnqueueMany prints the rows a second that one producer connection
// records with Enqueue (one call per intent) and with EnqueueMany (one call
// per transaction), at 1, 100 and 10,000 intents per transaction, each over
// 20,000 intents (2,000 at 1 per transaction):
//
//	go test -run '^$' -bench BenchmarkEnqueueMany -benchtime 1x ./dispatcher/
func BenchmarkEnqueueMany(b *testing.B) {
	pool := registered(b)
	ctx := context.Background()
	seq := 0
	batch := func(n int) []dispatcher.Intent {
		intents := make([]dispatcher.Intent, n)
		for i := range intents {
			seq++
			intents[i] = dispatcher.Intent{EventID: fmt.Sprintf("bench-%d", seq), Channel: "hook", Payload: `{"order": 1042}`}
		}
		return intents
	}
	ways := []struct {
		name   string
		record func(tx pgx.Tx, intents []dispatcher.Intent) error
	}{
		{"Enqueue", func(tx pgx.Tx, intents []dispatcher.Intent) error {
			for _, in := range intents {
				if _, err := dispatcher.Enqueue(ctx, tx, in); err != nil {
					return err
				}
			}
			return nil
		}},
		{"EnqueueMany", func(tx pgx.Tx, intents []dispatcher.Intent) error {
			_, err := dispatcher.EnqueueMany(ctx, tx, intents, dispatcher.BatchOptions{})
			return err
		}},
	}
	fmt.Fprintf(os.Stdout, "%-14s %12s %12s\n", "per transaction", "Enqueue", "EnqueueMany")
	for range b.N {
		for _, per := range []int{1, 100, 10_000} {
			total := 20_000
			if per == 1 {
				total = 2_000
			}
			rate := make([]float64, len(ways))
			for w, way := range ways {
				start := time.Now()
				for range total / per {
					intents := batch(per)
					if err := pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error { return way.record(tx, intents) }); err != nil {
						b.Fatal(err)
					}
				}
				rate[w] = float64(total) / time.Since(start).Seconds()
				b.ReportMetric(rate[w], fmt.Sprintf("%s-%d-rows/s", way.name, per))
			}
			fmt.Fprintf(os.Stdout, "%-15d %12.0f %12.0f rows/s\n", per, rate[0], rate[1])
		}
	}
}
