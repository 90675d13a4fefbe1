package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// sslRequest is the PostgreSQL protocol's SSLRequest: its length, 8, and the
// code 80877103, both big-endian int32. The server answers one byte, 'S' (go
// on in TLS) or 'N' (go on in plaintext, on the same connection).
var sslRequest = [8]byte{0, 0, 0, 8, 0x04, 0xd2, 0x16, 0x2f}

// preferTLSOnOneConnection makes sslmode=prefer (pgx's default) cost one
// connection, and so one backend start, whether or not the server speaks TLS.
//
// pgx parses prefer as two attempts: TLS, and when the server refuses it a
// second TCP connection in plaintext. Each attempt is a backend start of its
// own, and on a loaded machine a backend start takes over 100 ms — paid by
// every connection serve opens while it starts. PostgreSQL lets the client go
// on in plaintext on the connection whose SSLRequest it refused, as libpq does;
// this does the same: the plaintext attempt is kept, and its connection first
// asks for TLS with the TLS attempt's configuration. The connection is then TLS
// exactly when pgx's first attempt would have been.
//
// Only the plain form is rewritten: one host, no client certificate, and the
// default negotiation. Any other DSN (require, verify-*, sslnegotiation=direct,
// sslcert, several hosts, a Unix socket) is left to pgx as parsed. Two things
// differ from pgx's prefer: a cancel request on a connection made here goes in
// plaintext, as libpq's did before PostgreSQL 17, and a TLS handshake that
// fails after the server accepted TLS is an error rather than a reason to try
// again in plaintext.
func preferTLSOnOneConnection(cfg *pgxpool.Config) {
	cc := cfg.ConnConfig
	if cc.TLSConfig == nil || len(cc.Fallbacks) != 1 || cc.SSLNegotiation == "direct" ||
		(cc.SSLCertMode != "" && cc.SSLCertMode != "allow") ||
		len(cc.TLSConfig.Certificates) > 0 || cc.TLSConfig.GetClientCertificate != nil {
		return
	}
	plain := cc.Fallbacks[0]
	if plain.TLSConfig != nil || plain.Host != cc.Host || plain.Port != cc.Port {
		return
	}
	tlsConfig := cc.TLSConfig
	cc.TLSConfig, cc.Fallbacks = nil, nil
	after := cc.AfterNetConnect
	cc.AfterNetConnect = func(ctx context.Context, c *pgconn.Config, conn net.Conn) (net.Conn, error) {
		conn, err := askForTLS(ctx, conn, tlsConfig)
		if err != nil || after == nil {
			return conn, err
		}
		return after(ctx, c, conn)
	}
}

// askForTLS sends an SSLRequest on conn: it returns a TLS connection over conn
// when the server accepts, and conn itself when the server refuses. On an
// error it returns conn too, for pgx to close.
func askForTLS(ctx context.Context, conn net.Conn, tlsConfig *tls.Config) (net.Conn, error) {
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
		defer conn.SetDeadline(time.Time{})
	}
	if _, err := conn.Write(sslRequest[:]); err != nil {
		return conn, fmt.Errorf("asking for TLS: %w", err)
	}
	var answer [1]byte
	if _, err := io.ReadFull(conn, answer[:]); err != nil {
		return conn, fmt.Errorf("asking for TLS: %w", err)
	}
	switch answer[0] {
	case 'N':
		return conn, nil
	case 'S':
		tc := tls.Client(conn, tlsConfig)
		if err := tc.HandshakeContext(ctx); err != nil {
			return conn, fmt.Errorf("TLS handshake: %w", err)
		}
		return tc, nil
	default:
		return conn, fmt.Errorf("asking for TLS: the server answered %q, want 'S' or 'N'", answer[0])
	}
}
