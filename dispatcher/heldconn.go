package dispatcher

import (
	"cmp"
	"context"
	"maps"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/internal/query"
)

// The dispatch statements (claim, completion, taking expired leases) run on
// connections their service holds, from a pool of the dispatcher's own: the
// claimer holds one, each completer one, the reconciler one.
//
// A statement is planned on each connection that runs it: five plans for its
// values and then the generic one, and again whenever a relation it reads
// changes (an ANALYZE, a partition added). Each plan considers every day
// partition and its indexes, so with weeks of retention a plan costs tens of
// milliseconds. Taken from the shared pool, a statement ran on whichever
// connection was free and was planned on every one of them: in a live run at
// 1,000/s on 17 partitions the claim was planned 99 times and the completion
// 44 times, seconds of planning in ten seconds of load, each plan delaying the
// intents behind it. Held, each statement is planned on one connection per
// service that runs it.

// heldConn is a connection of pool that one goroutine keeps between uses.
// After an error it is given back (the pool closes it if it is broken) and
// the next use takes another; so is one held longer than the pool's
// connection lifetime, so that the pool still renews it. Not safe for
// concurrent use.
type heldConn struct {
	pool     *pgxpool.Pool
	conn     *pgxpool.Conn
	since    time.Time
	lifetime time.Duration // the pool's MaxConnLifetime (0 or less: never renewed)
}

// newHeldConn returns a heldConn of pool, holding nothing yet. It reads the
// pool's connection lifetime once: Config copies the whole configuration.
func newHeldConn(pool *pgxpool.Pool) heldConn {
	return heldConn{pool: pool, lifetime: pool.Config().MaxConnLifetime}
}

// use runs fn on the held connection, taking one from the pool first if none
// is held.
func (h *heldConn) use(ctx context.Context, fn func(db query.TxDB) error) error {
	if h.conn != nil && h.lifetime > 0 && time.Since(h.since) > h.lifetime {
		h.release()
	}
	if h.conn == nil {
		c, err := h.pool.Acquire(ctx)
		if err != nil {
			return err
		}
		h.conn, h.since = c, time.Now()
	}
	err := fn(h.conn)
	if err != nil {
		h.release()
	}
	return err
}

// release gives the held connection back to the pool.
func (h *heldConn) release() {
	if h.conn != nil {
		h.conn.Release()
		h.conn = nil
	}
}

// heldConns is how many connections the dispatcher's services hold: one per
// completer, the claimer's and the reconciler's.
func heldConns(c Config) int { return c.Completers + 2 }

// openHeld opens the pool the services hold their connections from: pool's
// configuration, as many connections as they hold, and an application_name
// that tells them apart in pg_stat_activity (pool's own, or "effectd", then
// HeldSuffix). It connects lazily.
//
// On one PostgreSQL its connections also take heldSettings, unless pool's URL
// sets them. The distributed mode leaves them to Citus.
func openHeld(ctx context.Context, pool *pgxpool.Pool, c Config) (*pgxpool.Pool, error) {
	cfg := pool.Config()
	cfg.MaxConns = int32(heldConns(c))
	cfg.MinConns = 0
	params := maps.Clone(cfg.ConnConfig.RuntimeParams)
	if params == nil {
		params = map[string]string{}
	}
	params["application_name"] = cmp.Or(params["application_name"], "effectd") + HeldSuffix
	if c.Buckets == 0 {
		for name, value := range heldSettings {
			if _, set := params[name]; !set {
				params[name] = value
			}
		}
	}
	cfg.ConnConfig.RuntimeParams = params
	return pgxpool.NewWithConfig(ctx, cfg)
}

// heldSettings are the settings of the held connections on one PostgreSQL.
//
// plan_cache_mode: they plan generically from the first run. Every statement
// they run is written to keep the generic plan PostgreSQL would choose after
// five plans for their values (TestClaimKeepsGenericPlan,
// TestCompleteKeepsGenericPlan, TestTakeExpiredReadsOnlyItsDays), so those five
// plans, each over every day partition, bought nothing.
//
// enable_seqscan: a plan is kept until a relation it reads changes, and it is
// often made while today's partition is empty (a fresh deployment, each new
// day's first claims). A sequential scan of an empty partition costs less than
// any index, so the claim's update planned then read the whole day at every
// claim once the day filled (8 ms a claim at 8,000 rows), until an ANALYZE of
// the partition made PostgreSQL plan again: up to a minute after midnight,
// whole runs in the bench. Every statement the held connections run reads its
// rows through an index (the plan tests above); with sequential scans off, a
// plan made on an empty day reads it through them too
// (TestHeldPlansReadIndexesAsTheDayFills).
//
// jit: with sequential scans off, a plan that still must scan a table (the
// one-row channels table read by the completion's notify trigger) carries the
// planner's disable cost of 10¹⁰, far above jit_above_cost, so PostgreSQL
// compiled it with LLVM at every run: about 50 ms of a statement that reads
// one row, in every claim and completion (30 effects a second at a
// concurrency of 4). serve turns JIT off on its whole pool; the held
// connections turn it off themselves, for a dispatcher built on any pool
// (TestHeldConnectionsCompileNothing).
var heldSettings = map[string]string{
	"plan_cache_mode": "force_generic_plan",
	"enable_seqscan":  "off",
	"jit":             "off",
}

// HeldSuffix ends the application_name of the connections the dispatch
// statements run on.
const HeldSuffix = " dispatch"
