package main

import (
	"context"
	"crypto/tls"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// skipRefusedTLS makes a pool whose DSN lets the connection fall back to
// plaintext (sslmode=prefer, pgx's default, or allow) stop asking for TLS once
// the server has refused it: each refused attempt costs a backend start of its
// own before the plaintext one, and on a loaded machine a backend start takes
// over 100 ms — paid by every connection serve opens while it starts. A DSN
// that requires TLS (require, verify-ca, verify-full) is left alone, and so is
// a server that accepted TLS.
func skipRefusedTLS(cfg *pgxpool.Config) {
	cc := cfg.ConnConfig
	if cc.TLSConfig == nil {
		return
	}
	var plain []*pgconn.FallbackConfig
	for _, f := range cc.Fallbacks {
		if f.TLSConfig == nil {
			plain = append(plain, f)
		}
	}
	if len(plain) == 0 {
		return
	}
	var refused atomic.Bool
	after := cfg.AfterConnect
	cfg.AfterConnect = func(ctx context.Context, c *pgx.Conn) error {
		if _, isTLS := c.PgConn().Conn().(*tls.Conn); !isTLS {
			refused.Store(true)
		}
		if after != nil {
			return after(ctx, c)
		}
		return nil
	}
	before := cfg.BeforeConnect
	cfg.BeforeConnect = func(ctx context.Context, c *pgx.ConnConfig) error {
		if refused.Load() {
			c.Host, c.Port, c.TLSConfig = plain[0].Host, plain[0].Port, nil
			c.Fallbacks = plain[1:]
		}
		if before != nil {
			return before(ctx, c)
		}
		return nil
	}
}
