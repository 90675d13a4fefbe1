package config

import (
	"fmt"
	"net/url"
	"strings"
)

// TracingSpec is the tracing section of the YAML. Tracing itself is turned
// on by the standard OTEL_* variables (docs/tracing.md); this section only
// says where people read the traces.
type TracingSpec struct {
	// UIURL is a trace UI's address of one trace, {trace_id} standing for
	// its id, e.g. https://jaeger.example.com/trace/{trace_id}: the console
	// links an intent's trace id to it.
	UIURL string `yaml:"ui_url"`
}

// ParseTraceURL reads tracing.ui_url: "" when absent; refused unless it is
// an http or https address holding {trace_id}.
func ParseTraceURL(b []byte) (string, error) {
	var f File
	root, err := decodeDocument(b, &f)
	if err != nil {
		return "", err
	}
	s := f.Tracing.UIURL
	if s == "" {
		return "", nil
	}
	p := []string{"tracing", "ui_url"}
	u, err := url.Parse(strings.ReplaceAll(s, "{trace_id}", "0"))
	switch {
	case !strings.Contains(s, "{trace_id}"):
		return "", &Error{Path: p, Line: lineOf(root, p), Msg: fmt.Sprintf("must hold {trace_id} where the trace id goes, got %s", quote(s))}
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return "", &Error{Path: p, Line: lineOf(root, p), Msg: fmt.Sprintf("want an http or https address, got %s", quote(s))}
	}
	return s, nil
}
