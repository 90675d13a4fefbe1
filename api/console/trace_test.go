package console

import (
	"context"
	"regexp"
	"strings"
	"testing"
)

// TestIntentPageTrace: the intent page shows the producer's trace id, linked
// to the trace UI when tracing.ui_url is configured, and "none" for an
// intent enqueued outside a trace.
func TestIntentPageTrace(t *testing.T) {
	t.Parallel()
	const traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
	trace := regexp.MustCompile(`(?s)<dd id="trace">(.*?)</dd>`)
	for _, ui := range []string{"", "https://jaeger.example.com/trace/{trace_id}"} {
		e := setup(t, func(c *Config) { c.TraceURL = ui })
		traced := e.insertSent(t, "evt-traced", "", "")
		plain := e.insertSent(t, "evt-plain", "", "")
		if _, err := e.pool.Exec(context.Background(), `UPDATE effectd.intents SET traceparent = $2 WHERE id = $1`,
			traced, "00-"+traceID+"-00f067aa0ba902b7-01"); err != nil {
			t.Fatal(err)
		}
		c := browserless(t)
		login(t, c, e.srv.URL, viewerToken)
		want := map[int64]string{traced: "<code>" + traceID + "</code>", plain: "none"}
		if ui != "" {
			want[traced] += ` · <a href="` + strings.ReplaceAll(ui, "{trace_id}", traceID) + `" rel="noopener noreferrer" target="_blank">open the trace</a>`
		}
		for id, w := range want {
			_, body := get(t, c, e.srv.URL+"/ui/intents/"+itoa(id))
			if m := trace.FindStringSubmatch(body); m == nil || strings.TrimSpace(m[1]) != w {
				t.Errorf("ui_url %q, intent %d: trace shown as %q, want %q", ui, id, m, w)
			}
		}
	}
}
