package emutest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// Receiver is an HTTP server that collects every request it gets and answers
// each with one status.
type Receiver struct {
	URL string // the server's base URL

	mu   sync.Mutex
	reqs []Request
	got  chan struct{}
}

// Request is one request a Receiver got.
type Request struct {
	Header http.Header
	Body   []byte
	URL    string // absolute, with the query
}

// NewReceiver starts a Receiver answering status; it stops when t ends.
func NewReceiver(t *testing.T, status int) *Receiver {
	r := &Receiver{got: make(chan struct{}, 100)}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		b, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.reqs = append(r.reqs, Request{Header: req.Header.Clone(), Body: b, URL: "http://" + req.Host + req.URL.RequestURI()})
		r.mu.Unlock()
		w.WriteHeader(status)
		r.got <- struct{}{}
	}))
	t.Cleanup(srv.Close)
	r.URL = srv.URL
	return r
}

// Until returns once cond holds, checked after each request, or fails after a deadline.
func (r *Receiver) Until(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	for !cond() {
		select {
		case <-r.got:
		case <-deadline:
			t.Fatal("the expected requests did not arrive")
		}
	}
}

// Wait returns once n requests arrived, or fails after a deadline.
func (r *Receiver) Wait(t *testing.T, n int) []Request {
	t.Helper()
	r.Until(t, func() bool { return len(r.All()) >= n })
	return r.All()
}

// All returns the requests received so far, oldest first.
func (r *Receiver) All() []Request {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Request(nil), r.reqs...)
}
