package dispatcher

import dto "github.com/prometheus/client_model/go"

// SweepFindings returns effectd_sweep_findings_total for channel and kind.
func SweepFindings(d *Dispatcher, channel, kind string) float64 {
	var m dto.Metric
	d.m.sweepFindings.WithLabelValues(channel, kind).Write(&m)
	return m.GetCounter().GetValue()
}
