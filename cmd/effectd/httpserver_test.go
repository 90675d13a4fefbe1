package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"testing"
	"time"
)

// startLimited serves, within l, a handler that answers 401 without reading
// the body (as the admin API does without a token) and returns its address.
func startLimited(t *testing.T, l httpLimits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusUnauthorized) })
	go func() { done <- serveLimited(ctx, ln, h, time.Second, l) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return ln.Addr().String()
}

// dial opens a connection and writes raw to it.
func dial(t *testing.T, addr, raw string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	return c
}

// closedWithin reports whether the server closes c within d, after whatever it answers.
func closedWithin(t *testing.T, c net.Conn, d time.Duration) bool {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	_, err := io.Copy(io.Discard, c)
	return !errors.Is(err, os.ErrDeadlineExceeded)
}

// TestAdminServerLimits: a slow body without a token and an idle keep-alive
// connection are closed by the server's timeouts, and connections past the
// cap wait until one closes.
func TestAdminServerLimits(t *testing.T) {
	t.Parallel()
	addr := startLimited(t, httpLimits{ReadTimeout: 300 * time.Millisecond, WriteTimeout: time.Second, IdleTimeout: 300 * time.Millisecond, MaxConns: 8})
	slow := dial(t, addr, "POST /v1/intents/1/retry HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
	if !closedWithin(t, slow, 5*time.Second) {
		t.Error("a request whose body never comes holds its connection open")
	}
	idle := dial(t, addr, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(idle), nil)
	if err != nil || resp.StatusCode != http.StatusUnauthorized || resp.Close {
		t.Fatalf("%v, %v: want a kept-alive 401", resp, err)
	}
	if !closedWithin(t, idle, 5*time.Second) {
		t.Error("an idle keep-alive connection is never closed")
	}

	addr = startLimited(t, httpLimits{ReadTimeout: time.Minute, WriteTimeout: time.Minute, IdleTimeout: time.Minute, MaxConns: 2})
	first := dial(t, addr, "GET /healthz HTTP/1.1\r\n") // headers never finished
	dial(t, addr, "GET /healthz HTTP/1.1\r\n")
	third := dial(t, addr, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
	third.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	r := bufio.NewReader(third)
	if resp, err := http.ReadResponse(r, nil); err == nil {
		t.Fatalf("a third connection past a cap of 2 was served: %s", resp.Status)
	}
	first.Close()
	third.SetReadDeadline(time.Now().Add(10 * time.Second))
	if resp, err := http.ReadResponse(r, nil); err != nil || resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("the waiting connection was not served once a slot freed: %v, %v", resp, err)
	}
}
