package main

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/effectd/effectd/internal/pgtest"
)

// countingProxy forwards TCP connections to target and counts them.
func countingProxy(t *testing.T, target string) (addr string, accepted *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	accepted = new(atomic.Int64)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer c.Close()
				s, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer s.Close()
				go io.Copy(s, c)
				io.Copy(c, s)
			}()
		}
	}()
	return ln.Addr().String(), accepted
}

// TestConnectAsksForTLSOnce: with sslmode=prefer against a server without
// TLS, the first connection asks for TLS, is refused and connects again in
// plaintext; the pool's later connections go straight to plaintext, one TCP
// connection (and one backend start) each instead of two.
func TestConnectAsksForTLSOnce(t *testing.T) {
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	addr, accepted := countingProxy(t, u.Host)
	u.Host = addr
	q := u.Query()
	q.Set("sslmode", "prefer")
	u.RawQuery = q.Encode()
	ctx := context.Background()
	pool, err := connect(ctx, u.String())
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if n := accepted.Load(); n != 2 {
		t.Fatalf("first connection: %d TCP connections, want 2 (TLS refused, then plaintext)", n)
	}
	const more = 3
	first, err := pool.Acquire(ctx) // hold the first, so each Acquire below opens a connection
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, more)
	for range more {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := pool.Acquire(ctx)
			if err != nil {
				errs <- err
				return
			}
			defer c.Release()
			_, err = c.Exec(ctx, "SELECT 1")
			errs <- err
		}()
	}
	wg.Wait()
	first.Release()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if n := accepted.Load(); n != 2+more {
		t.Fatalf("%d TCP connections for %d pool connections; want %d: later connections should not ask for TLS again", n, 1+more, 2+more)
	}
}
