package config

import (
	"strings"
	"testing"
)

// TestParseTraceURL: tracing.ui_url is an http(s) address holding
// {trace_id}; anything else is refused naming the key and its line.
func TestParseTraceURL(t *testing.T) {
	t.Parallel()
	base := "channels:\n  hook:\n    provider: webhook\n    webhook: { url: \"http://127.0.0.1:1/x\", secret_env: HOOK_SECRET }\n"
	for _, c := range []struct{ yaml, want, err string }{
		{base, "", ""},
		{base + "tracing:\n  ui_url: \"https://jaeger.example.com/trace/{trace_id}\"\n", "https://jaeger.example.com/trace/{trace_id}", ""},
		{base + "tracing:\n  ui_url: \"https://jaeger.example.com/trace/\"\n", "", "tracing.ui_url: line 6: must hold {trace_id}"},
		{base + "tracing:\n  ui_url: \"javascript:alert({trace_id})\"\n", "", "tracing.ui_url: line 6: want an http or https address"},
		{base + "tracing:\n  ui: x\n", "", "ui"},
	} {
		got, err := ParseTraceURL([]byte(c.yaml))
		if c.err == "" && (err != nil || got != c.want) {
			t.Errorf("%q: got %q, %v; want %q", c.yaml, got, err, c.want)
		}
		if c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%q: error %v, want one containing %q", c.yaml, err, c.err)
		}
	}
}
