package chaos

import (
	"context"
	"fmt"
	"path/filepath"
	"time"

	"github.com/effectd/effectd/internal/localpg"
)

// CitusWorkers is how many workers a Citus run's cluster has.
const CitusWorkers = 2

// Inspection is what Config.AfterDrain is given: the run's database and the
// admin API of every instance, all serving.
type Inspection struct {
	DSN     string   // the database (on Citus, the coordinator's)
	Admin   []string // each instance's admin API, "http://host:port" (no token: --insecure-no-auth)
	Buckets int      // the producer's buckets on Citus; 0 on one PostgreSQL
}

// startCitus starts a coordinator and CitusWorkers workers on loopback and
// makes the effectd database on every node.
func (h *harness) startCitus(ctx context.Context) error {
	c, err := localpg.StartCitus(ctx, filepath.Join(h.dir, "citus"), CitusWorkers, localpg.Options{Fast: true,
		Settings: []string{"citus.shard_count=8"}})
	if err != nil {
		return err
	}
	h.citus, h.pg = c, c.Coordinator
	h.dsn = c.URL("effectd")
	return c.CreateDatabase(ctx, "effectd")
}

// citusYAML is the database section of a Citus run's configuration: effectd's
// tables co-located with the producers' producer.orders.
func (h *harness) citusYAML() string {
	if h.citus == nil {
		return ""
	}
	return fmt.Sprintf("database:\n  citus: { colocate_with: producer.orders, bucket_column: bucket, buckets: %d }\n", h.cfg.Buckets)
}

// buckets is the producer's bucket count: 0 on one PostgreSQL.
func (h *harness) buckets() int {
	if h.citus == nil {
		return 0
	}
	return h.cfg.Buckets
}

// restartWorker is a Citus run's pgrestart: it stops a worker (fast: its
// sessions are cut, and every statement on its shards fails meanwhile) and
// starts it again on its port, each worker in turn.
func (h *harness) restartWorker() error {
	i := h.restarts % len(h.citus.Workers)
	h.restarts++
	if err := h.citus.StopWorker(i); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	return h.citus.StartWorker(ctx, i)
}

// pgName is what a pgrestart restarts, for the log.
func (h *harness) pgName() string {
	if h.citus != nil {
		return "a Citus worker"
	}
	return "PostgreSQL"
}

// inspect calls cfg.AfterDrain, if any, while every instance serves.
func (h *harness) inspect(ctx context.Context) {
	if h.cfg.AfterDrain == nil {
		return
	}
	var admin []string
	for _, p := range h.instances {
		if a, ok := p.addr.Load().(string); ok {
			admin = append(admin, a)
		}
	}
	h.cfg.AfterDrain(ctx, Inspection{DSN: h.dsn, Admin: admin, Buckets: h.buckets()})
}
