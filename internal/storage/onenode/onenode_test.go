package onenode_test

import (
	"context"
	"testing"

	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/internal/storage/onenode"
	"github.com/effectd/effectd/internal/storage/storagetest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// TestContract runs the storage contract suite on one PostgreSQL.
func TestContract(t *testing.T) {
	pool := pgtest.New(t)
	storagetest.Run(t, storagetest.Harness{Store: onenode.New(pool), Pool: pool,
		Enqueue: func(t *testing.T, channel, event string, _ int) {
			t.Helper()
			if _, err := pool.Exec(context.Background(), `SELECT effectd.enqueue(event_id => $1, channel => $2, payload => '{"n": 1}')`, event, channel); err != nil {
				t.Fatalf("enqueue %s: %v", event, err)
			}
		}})
}
