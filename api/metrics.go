package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/effectd/effectd/migrations"
)

// scrapeTimeout bounds the database queries of one scrape or readiness check.
const scrapeTimeout = 5 * time.Second

var (
	oldestPendingDesc = prometheus.NewDesc("effectd_oldest_pending_age_seconds",
		"How long the oldest due PENDING intent of the channel has waited for a worker, since it became due; 0 when none is due.", []string{"channel"}, nil)
	sendingPastLeaseDesc = prometheus.NewDesc("effectd_sending_past_lease",
		"SENDING intents of the channel whose lease expired: in doubt, waiting for the reconciler.", []string{"channel"}, nil)
	inDoubtDesc = prometheus.NewDesc("effectd_in_doubt",
		"IN_DOUBT intents of the channel, waiting for an operator.", []string{"channel"}, nil)
)

// collector reads the per-channel gauges from the database at each scrape, so
// every instance reports the same shared truth.
type collector struct{ h *handler }

func newCollector(h *handler) prometheus.Collector { return collector{h} }

// Describe sends the descriptors of the gauges.
func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- oldestPendingDesc
	ch <- sendingPastLeaseDesc
	ch <- inDoubtDesc
}

// Collect queries the database and sends one sample per channel and gauge.
func (c collector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	gauges, err := c.h.svc.Gauges(ctx)
	if err != nil {
		c.h.log.Warn("metrics: reading channel gauges", "err", err)
		ch <- prometheus.NewInvalidMetric(oldestPendingDesc, err)
		return
	}
	for _, g := range gauges {
		ch <- prometheus.MustNewConstMetric(oldestPendingDesc, prometheus.GaugeValue, g.OldestPendingAge, g.Channel)
		ch <- prometheus.MustNewConstMetric(sendingPastLeaseDesc, prometheus.GaugeValue, float64(g.SendingPastLease), g.Channel)
		ch <- prometheus.MustNewConstMetric(inDoubtDesc, prometheus.GaugeValue, float64(g.InDoubt), g.Channel)
	}
}

// healthz answers GET /healthz: the process is alive.
func (h *handler) healthz(_ http.ResponseWriter, _ *http.Request) (map[string]string, error) {
	return map[string]string{"status": "ok"}, nil
}

// readyTimeout bounds the readiness check: a database that does not answer
// within it (a primary gone, a pool with no connection to give) is not ready,
// and the probe hears so before its own timeout (Kubernetes' default is 1 s;
// the chart's 6 s) instead of hanging up on a check still waiting.
const readyTimeout = 900 * time.Millisecond

// readyz answers GET /readyz: 200 when the database answers within
// readyTimeout and its migrations are current, 503 otherwise.
func (h *handler) readyz(_ http.ResponseWriter, r *http.Request) (map[string]string, error) {
	ctx, cancel := context.WithTimeout(r.Context(), readyTimeout)
	defer cancel()
	if err := h.ready(ctx); err != nil {
		h.log.WarnContext(ctx, "not ready", "err", err)
		return nil, errNotReady
	}
	return map[string]string{"status": "ready"}, nil
}

// errNotReady is all readyz tells an unauthenticated caller; the log has the cause.
var errNotReady = fmt.Errorf("%w: the database is unreachable or its migrations are behind", errUnavailable)

// poolReady reports an error unless pool answers and its migrations are current.
func poolReady(pool *pgxpool.Pool) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		if err := pool.Ping(ctx); err != nil {
			return err
		}
		ok, err := migrations.Current(ctx, pool)
		if err != nil {
			return err
		}
		if !ok {
			return errors.New("migrations are behind: run effectd migrate")
		}
		return nil
	}
}
