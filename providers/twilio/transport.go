package twilio

import (
	"context"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync"
)

// callTransport carries one Send or Lookup: it gives each request the call's
// context (twilio-go builds requests with context.Background()), points it at
// the base URL when one is set, and records whether the last request was
// written and what status and headers answered it, which twilio-go drops.
type callTransport struct {
	ctx     context.Context
	next    http.RoundTripper
	baseURL *url.URL // nil = leave https://api.twilio.com

	mu       sync.Mutex
	wrote    bool
	answered int
	header   http.Header
}

// RoundTrip sends req with the call's context, rewritten to the base URL.
func (t *callTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	t.mu.Lock()
	t.wrote, t.answered, t.header = false, 0, nil
	t.mu.Unlock()

	ctx := httptrace.WithClientTrace(t.ctx, &httptrace.ClientTrace{
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err == nil {
				t.mu.Lock()
				t.wrote = true
				t.mu.Unlock()
			}
		},
	})
	r := req.Clone(ctx)
	if t.baseURL != nil {
		r.URL.Scheme = t.baseURL.Scheme
		r.URL.Host = t.baseURL.Host
		r.URL.Path = strings.TrimSuffix(t.baseURL.Path, "/") + r.URL.Path
		r.URL.RawPath = ""
		r.Host = ""
	}
	resp, err := t.next.RoundTrip(r)
	if err == nil {
		t.mu.Lock()
		t.answered, t.header = resp.StatusCode, resp.Header
		t.mu.Unlock()
	}
	return resp, err
}

// status is the HTTP status of the last answer, 0 when none came.
func (t *callTransport) status() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.answered
}

// written reports whether the last request was written in full, so the
// provider may have acted on it.
func (t *callTransport) written() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.wrote
}

// retryAfter returns the last answer's Retry-After header.
func (t *callTransport) retryAfter() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.header.Get("Retry-After")
}
