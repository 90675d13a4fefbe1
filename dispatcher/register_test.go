package dispatcher_test

import (
	"context"
	"testing"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/pgtest"
)

// TestRegisterAnalyzesChannels: once channels are registered, the planner
// knows how many there are (reltuples), rather than its guess for a table
// never analyzed, which priced a count over every channel past the JIT
// threshold.
func TestRegisterAnalyzesChannels(t *testing.T) {
	ctx := context.Background()
	pool := pgtest.New(t)
	var chans []dispatcher.Channel
	for _, name := range []string{"a", "b", "c"} {
		chans = append(chans, dispatcher.Channel{Name: name, Kind: "webhook", Policy: fastPolicy("webhook")})
	}
	if err := dispatcher.Register(ctx, pool, chans); err != nil {
		t.Fatal(err)
	}
	for _, table := range []string{"effectd.channels", "effectd.rate_buckets"} {
		var tuples float64
		if err := pool.QueryRow(ctx, "SELECT reltuples FROM pg_class WHERE oid = $1::regclass", table).Scan(&tuples); err != nil {
			t.Fatal(err)
		}
		if tuples != 3 {
			t.Errorf("%s: the planner counts %v rows, want 3", table, tuples)
		}
	}
}
