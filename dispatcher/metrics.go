package dispatcher

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/statemachine"
)

// metrics are the dispatcher's own series; the admin API adds gauges read from
// the database (oldest PENDING age, SENDING past lease, IN_DOUBT).
type metrics struct {
	outcomes *prometheus.CounterVec   // channel, outcome
	calls    *prometheus.HistogramVec // channel
	lookups  *prometheus.CounterVec   // channel, outcome
	retries  *prometheus.CounterVec   // channel
	fenced   *prometheus.CounterVec   // channel
	inflight *prometheus.GaugeVec     // channel

	retryAfter *prometheus.CounterVec // channel

	deliveries   *prometheus.CounterVec   // channel, delivery
	deliveryTime *prometheus.HistogramVec // channel
	orphans      *prometheus.CounterVec   // channel

	sweepFindings *prometheus.CounterVec // channel, kind
	sweepLastRun  *prometheus.GaugeVec   // channel
	sweepLastSeen *prometheus.GaugeVec   // channel

	partitionsDropped *prometheus.CounterVec // table
	partitionsHeld    prometheus.Gauge
	partitionsBusy    prometheus.Counter
	partitionsUntil   prometheus.Gauge
	dedupeKeysPruned  prometheus.Counter
}

func newMetrics(reg prometheus.Registerer) *metrics {
	m := &metrics{
		outcomes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "effectd_intents_total", Help: "Dispatcher outcomes by channel: sent, retry, failed, skipped, in_doubt, maybe_sent, quarantined (a row that cannot be sent as stored: FAILED without a call).",
		}, []string{"channel", "outcome"}),
		calls: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "effectd_provider_call_seconds", Help: "Provider call latency by channel.",
			Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
		}, []string{"channel"}),
		lookups: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "effectd_lookups_total", Help: "In-doubt settlements by channel and outcome: found, absent, ambiguous, policy.",
		}, []string{"channel", "outcome"}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "effectd_retries_total", Help: "Calls scheduled for another attempt, by channel.",
		}, []string{"channel"}),
		fenced: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "effectd_fenced_total", Help: "Completions refused by the fence: the row was settled by someone else.",
		}, []string{"channel"}),
		inflight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "effectd_inflight_calls", Help: "Provider calls in flight in this instance, by channel.",
		}, []string{"channel"}),
		retryAfter: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "effectd_retry_after_seconds_total", Help: "Back-off that providers asked for with Retry-After, by channel, in seconds (at most 5 minutes an answer): the channel claims nothing meanwhile.",
		}, []string{"channel"}),
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "effectd_deliveries_total", Help: "Delivery changes by channel and the delivery reached: accepted, delivered, undelivered.",
		}, []string{"channel", "delivery"}),
		deliveryTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "effectd_delivery_seconds", Help: "Time from SENT to a final delivery (delivered or undelivered), by channel.",
			Buckets: []float64{.1, .5, 1, 2.5, 5, 10, 30, 60, 300, 900, 3600, 6 * 3600, 24 * 3600, 72 * 3600},
		}, []string{"channel"}),
		orphans: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "effectd_orphan_events_total", Help: "Provider events that matched no intent, by channel.",
		}, []string{"channel"}),
		sweepFindings: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "effectd_sweep_findings_total", Help: "Findings of reconciliation sweeps, by channel and kind: orphan, duplicate, unsettled, missing.",
		}, []string{"channel", "kind"}),
		sweepLastRun: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "effectd_sweep_last_run_timestamp_seconds", Help: "When this instance last finished a channel's scheduled sweep (policy sweep.every), in Unix seconds.",
		}, []string{"channel"}),
		sweepLastSeen: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "effectd_sweep_last_run_findings", Help: "Findings of the last scheduled sweep this instance finished, by channel.",
		}, []string{"channel"}),
		partitionsDropped: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "effectd_partitions_dropped_total", Help: "Expired day partitions this instance's pruner dropped, by table: intents, attempts, provider_events.",
		}, []string{"table"}),
		partitionsHeld: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "effectd_retention_held_partitions", Help: "Intents day partitions past the retention horizon that the last prune kept, because they hold a live row (PENDING, SENDING, IN_DOUBT) or one changed within the horizon.",
		}),
		partitionsBusy: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "effectd_partition_drops_postponed_total", Help: "Drops of expired day partitions this instance's pruner put off to its next run because a lock on the partition was not free within 50 ms, 20 times: a drop waits no longer, so that no enqueue or claim queues behind it.",
		}),
		partitionsUntil: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "effectd_partitions_until_timestamp_seconds", Help: "When the last day partition of intents ends, in Unix seconds, as this instance's pruner last saw it: the pruner keeps it three days ahead, and an enqueue after it fails.",
		}),
		dedupeKeysPruned: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "effectd_dedupe_keys_pruned_total", Help: "Dedupe keys this instance's pruner deleted: their channel's dedupe horizon (policy.dedupe_days) had passed and their intents partition was gone.",
		}),
	}
	for _, t := range []string{"intents", "attempts", "provider_events"} {
		m.partitionsDropped.WithLabelValues(t)
	}
	if reg != nil {
		reg.MustRegister(m.outcomes, m.calls, m.lookups, m.retries, m.fenced, m.inflight, m.retryAfter, m.deliveries, m.deliveryTime, m.orphans, m.sweepFindings,
			m.sweepLastRun, m.sweepLastSeen, m.partitionsDropped, m.partitionsHeld, m.partitionsBusy, m.partitionsUntil, m.dedupeKeysPruned)
	}
	return m
}

// outcomeNames are the outcomes a send records (effectd_intents_total).
var outcomeNames = []string{"sent", "retry", "failed", "skipped", "in_doubt", "maybe_sent"}

// addChannel creates every series of channel at zero, so that dashboards and
// alerts on rates see 0 from the start, not "no data" until the first event.
func (m *metrics) addChannel(channel string) {
	for _, o := range outcomeNames {
		m.outcomes.WithLabelValues(channel, o)
	}
	for _, o := range []string{LookupFound, LookupAbsent, LookupAmbiguous, ByPolicy} {
		m.lookups.WithLabelValues(channel, o)
	}
	for _, d := range []statemachine.Delivery{statemachine.Accepted, statemachine.Delivered, statemachine.Undelivered} {
		m.deliveries.WithLabelValues(channel, string(d))
	}
	for _, k := range effectdtype.FindingKinds {
		m.sweepFindings.WithLabelValues(channel, k)
	}
	for _, v := range []*prometheus.MetricVec{m.calls.MetricVec, m.retries.MetricVec, m.fenced.MetricVec, m.inflight.MetricVec, m.retryAfter.MetricVec, m.deliveryTime.MetricVec, m.orphans.MetricVec} {
		v.GetMetricWithLabelValues(channel)
	}
}
