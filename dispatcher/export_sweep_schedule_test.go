package dispatcher

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// SetSweepClock makes d's sweep scheduler read the time from now and look
// at the schedules at least every tick. Call it before Start.
func SetSweepClock(d *Dispatcher, tick time.Duration, now func() time.Time) {
	d.sweeper.tick, d.sweeper.now = tick, now
}

// SweepLockKey is the advisory lock key of channel's scheduled sweep.
func SweepLockKey(channel string) int64 { return sweepLockKey(channel) }

// SweepLastRun returns effectd_sweep_last_run_timestamp_seconds and
// effectd_sweep_last_run_findings for channel, and whether a scheduled sweep
// of channel has set them.
func SweepLastRun(d *Dispatcher, channel string) (at, findings float64, ok bool) {
	get := func(v *prometheus.GaugeVec) (float64, bool) {
		c := make(chan prometheus.Metric, 64)
		v.Collect(c)
		close(c)
		for m := range c {
			var pb dto.Metric
			m.Write(&pb)
			for _, l := range pb.GetLabel() {
				if l.GetName() == "channel" && l.GetValue() == channel {
					return pb.GetGauge().GetValue(), true
				}
			}
		}
		return 0, false
	}
	at, ok = get(d.m.sweepLastRun)
	findings, _ = get(d.m.sweepLastSeen)
	return at, findings, ok
}
