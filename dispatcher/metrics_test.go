package dispatcher_test

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/policy"
)

// TestMetricsStartAtZero: every labelled series of every configured channel
// exists at 0 before anything happens, so dashboards see 0, not "no data".
func TestMetricsStartAtZero(t *testing.T) {
	t.Parallel()
	reg := prometheus.NewRegistry()
	var chans []dispatcher.Channel
	for _, name := range []string{"a", "b"} {
		chans = append(chans, dispatcher.Channel{Name: name, Kind: "webhook", Provider: &scripted{}, Policy: policy.Default("webhook")})
	}
	if _, err := dispatcher.New(nil, dispatcher.Config{Channels: chans, Registerer: reg}); err != nil {
		t.Fatal(err)
	}
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	series := map[string]float64{} // name{channel,outcome} → value
	for _, f := range families {
		for _, m := range f.GetMetric() {
			key := f.GetName()
			for _, l := range m.GetLabel() {
				key += " " + l.GetName() + "=" + l.GetValue()
			}
			switch {
			case m.Counter != nil:
				series[key] = m.Counter.GetValue()
			case m.Gauge != nil:
				series[key] = m.Gauge.GetValue()
			case m.Histogram != nil:
				series[key] = float64(m.Histogram.GetSampleCount())
			}
		}
	}
	for _, ch := range []string{"a", "b"} {
		for _, key := range []string{
			"effectd_fenced_total channel=" + ch,
			"effectd_retries_total channel=" + ch,
			"effectd_inflight_calls channel=" + ch,
			"effectd_provider_call_seconds channel=" + ch,
			"effectd_intents_total channel=" + ch + " outcome=sent",
			"effectd_intents_total channel=" + ch + " outcome=maybe_sent",
			"effectd_lookups_total channel=" + ch + " outcome=ambiguous",
			"effectd_deliveries_total channel=" + ch + " delivery=undelivered",
			"effectd_orphan_events_total channel=" + ch,
			"effectd_delivery_seconds channel=" + ch,
		} {
			if v, ok := series[key]; !ok || v != 0 {
				t.Errorf("%s: %v, present %v; want 0", key, v, ok)
			}
		}
	}
}
