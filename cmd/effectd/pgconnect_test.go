package main

import (
	"context"
	"io"
	"net"
	"net/url"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

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

// openConns acquires n pool connections, holding each while it acquires the
// next so that each is a connection of its own, and returns what query
// returned on each.
func openConns(t *testing.T, pool *pgxpool.Pool, n int, query string) []bool {
	t.Helper()
	ctx := context.Background()
	conns := make([]*pgxpool.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Release()
		}
	}()
	var got []bool
	for range n {
		c, err := pool.Acquire(ctx)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		var v bool
		if err := c.QueryRow(ctx, query).Scan(&v); err != nil {
			t.Fatal(err)
		}
		got = append(got, v)
	}
	return got
}

// dsnThrough returns dsn pointed at proxy with sslmode set.
func dsnThrough(t *testing.T, dsn, proxy, sslmode string) string {
	t.Helper()
	u, err := url.Parse(dsn)
	if err != nil {
		t.Fatal(err)
	}
	u.Host = proxy
	q := u.Query()
	q.Set("sslmode", sslmode)
	u.RawQuery = q.Encode()
	return u.String()
}

const isTLS = "SELECT ssl FROM pg_stat_ssl WHERE pid = pg_backend_pid()"

// TestConnectPreferIsOneConnection: with sslmode=prefer against a server
// without TLS, each pool connection is one TCP connection (and one backend
// start): the refused SSLRequest is followed by plaintext on the same
// connection, not by a second connection.
func TestConnectPreferIsOneConnection(t *testing.T) {
	u, err := url.Parse(pgtest.URL(t))
	if err != nil {
		t.Fatal(err)
	}
	addr, accepted := countingProxy(t, u.Host)
	pool, err := connect(context.Background(), dsnThrough(t, u.String(), addr, "prefer"))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	if n := accepted.Load(); n != 1 {
		t.Fatalf("first connection: %d TCP connections, want 1 (TLS refused, then plaintext on the same one)", n)
	}
	const conns = 4
	for i, tls := range openConns(t, pool, conns, isTLS) {
		if tls {
			t.Fatalf("connection %d is TLS on a server without it", i)
		}
	}
	if n := accepted.Load(); n != conns {
		t.Fatalf("%d TCP connections for %d pool connections; want one each", n, conns)
	}
}

// TestConnectPreferUsesTLS: with sslmode=prefer against a server with TLS,
// every connection, the listener's way of connecting included, is TLS, one
// TCP connection each; sslmode=disable stays plaintext.
func TestConnectPreferUsesTLS(t *testing.T) {
	certFile, keyFile, _ := selfSigned(t)
	cert, err := os.ReadFile(certFile)
	if err != nil {
		t.Fatal(err)
	}
	key, err := os.ReadFile(keyFile)
	if err != nil {
		t.Fatal(err)
	}
	pg := pgtest.ClusterWithFiles(t, "tls", map[string][]byte{"server.crt": cert, "server.key": key},
		"ssl=on", "ssl_cert_file=../server.crt", "ssl_key_file=../server.key")
	u, err := url.Parse(pg.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	addr, accepted := countingProxy(t, u.Host)
	ctx := context.Background()
	pool, err := connect(ctx, dsnThrough(t, u.String(), addr, "prefer"))
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	const conns = 3
	for i, tls := range openConns(t, pool, conns, isTLS) {
		if !tls {
			t.Fatalf("connection %d is plaintext; the server offers TLS and sslmode=prefer asks for it", i)
		}
	}
	if n := accepted.Load(); n != conns {
		t.Fatalf("%d TCP connections for %d pool connections; want one each", n, conns)
	}
	// The listener connects on its own with the pool's ConnConfig.
	c, err := pgx.ConnectConfig(ctx, pool.Config().ConnConfig.Copy())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	var tls bool
	if err := c.QueryRow(ctx, isTLS).Scan(&tls); err != nil || !tls {
		t.Fatalf("a connection from the pool's ConnConfig: TLS %v, %v; want TLS", tls, err)
	}
	plain, err := connect(ctx, dsnThrough(t, u.String(), addr, "disable"))
	if err != nil {
		t.Fatal(err)
	}
	defer plain.Close()
	if got := openConns(t, plain, 1, isTLS); got[0] {
		t.Fatal("sslmode=disable made a TLS connection")
	}
}

// TestConnectPreferBadAnswer: a server that answers the SSLRequest with
// neither 'S' nor 'N' gets a connection error that says so, and the connection
// is closed.
func TestConnectPreferBadAnswer(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	closed := make(chan struct{})
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		var req [8]byte
		if _, err := io.ReadFull(c, req[:]); err != nil {
			return
		}
		c.Write([]byte("E"))
		io.Copy(io.Discard, c) // returns once the client closes
		close(closed)
	}()
	cfg, err := pgxpool.ParseConfig("postgres://postgres@" + ln.Addr().String() + "/postgres?sslmode=prefer&connect_timeout=5")
	if err != nil {
		t.Fatal(err)
	}
	preferTLSOnOneConnection(cfg)
	_, err = pgx.ConnectConfig(context.Background(), cfg.ConnConfig)
	if err == nil || !strings.Contains(err.Error(), `the server answered 'E'`) {
		t.Fatalf("connect to a server answering 'E': %v; want an error naming the answer", err)
	}
	select {
	case <-closed:
	case <-time.After(5 * time.Second):
		t.Fatal("the connection was not closed")
	}
}

// TestConnectTurnsJITOff: effectd's connections plan without JIT, unless the
// URL says otherwise.
func TestConnectTurnsJITOff(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.URL(t)
	for _, tc := range []struct{ dsn, want string }{
		{dsn, "off"},
		{dsn + map[bool]string{true: "&", false: "?"}[strings.Contains(dsn, "?")] + "jit=on", "on"},
	} {
		pool, err := connect(ctx, tc.dsn)
		if err != nil {
			t.Fatal(err)
		}
		var jit string
		err = pool.QueryRow(ctx, "SHOW jit").Scan(&jit)
		pool.Close()
		if err != nil {
			t.Fatal(err)
		}
		if jit != tc.want {
			t.Errorf("jit = %q on a connection to %s, want %q", jit, tc.dsn, tc.want)
		}
	}
}

// TestConnectOneConnectionPerWorker: in the distributed mode serve's
// sessions send a multi-shard statement to each Citus worker over one
// connection (citus.max_adaptive_executor_pool_size = 1), unless the URL says
// otherwise; in single-node mode the setting is not sent at all. (On plain
// PostgreSQL the setting is a placeholder, which SHOW reads back.)
func TestConnectOneConnectionPerWorker(t *testing.T) {
	ctx := context.Background()
	dsn := pgtest.URL(t)
	sep := map[bool]string{true: "&", false: "?"}[strings.Contains(dsn, "?")]
	for _, tc := range []struct {
		dsn, want string
		tune      []func(*pgxpool.Config)
	}{
		{dsn, "1", []func(*pgxpool.Config){oneConnectionPerWorker}},
		{dsn + sep + "citus.max_adaptive_executor_pool_size=4", "4", []func(*pgxpool.Config){oneConnectionPerWorker}},
		{dsn, "", nil},
	} {
		pool, err := connect(ctx, tc.dsn, tc.tune...)
		if err != nil {
			t.Fatal(err)
		}
		var size string
		err = pool.QueryRow(ctx, "SELECT coalesce(current_setting('citus.max_adaptive_executor_pool_size', true), '')").Scan(&size)
		pool.Close()
		if err != nil {
			t.Fatal(err)
		}
		if size != tc.want {
			t.Errorf("citus.max_adaptive_executor_pool_size = %q on a connection to %s (tuned: %v), want %q", size, tc.dsn, tc.tune != nil, tc.want)
		}
	}
}
