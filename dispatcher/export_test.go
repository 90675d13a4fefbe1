package dispatcher

import (
	"context"

	dto "github.com/prometheus/client_model/go"
)

// SetBeforeCall makes every worker run f between taking a claimed intent and
// calling its provider. Call it before Start.
func SetBeforeCall(d *Dispatcher, f func(id int64, attempt int32)) { d.workers.beforeCall = f }

// Prune runs d's pruner once now and returns how many intents it deleted.
func Prune(ctx context.Context, d *Dispatcher) (int64, error) { return d.pruner.prune(ctx) }

// PollDeliveries runs d's delivery poller once now and returns how many
// intents it polled.
func PollDeliveries(ctx context.Context, d *Dispatcher) (int, error) {
	return d.poller.pollDeliveries(ctx)
}

// Fenced returns how many outcomes of channel were fenced out.
func Fenced(d *Dispatcher, channel string) float64 {
	var m dto.Metric
	d.m.fenced.WithLabelValues(channel).Write(&m)
	return m.GetCounter().GetValue()
}

// Paused reports whether the dispatcher has seen channel paused.
func Paused(d *Dispatcher, channel string) bool { return d.byName[channel].paused.Load() }

// Orphans returns effectd_orphan_events_total for channel.
func Orphans(d *Dispatcher, channel string) float64 {
	var m dto.Metric
	d.m.orphans.WithLabelValues(channel).Write(&m)
	return m.GetCounter().GetValue()
}

// ConfigOf returns d's Config with its defaults applied.
func ConfigOf(d *Dispatcher) Config { return d.cfg }

// Lookups returns effectd_lookups_total for channel and outcome.
func Lookups(d *Dispatcher, channel, outcome string) float64 {
	var m dto.Metric
	d.m.lookups.WithLabelValues(channel, outcome).Write(&m)
	return m.GetCounter().GetValue()
}
