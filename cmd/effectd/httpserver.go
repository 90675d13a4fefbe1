package main

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"
)

// httpLimits bound what clients can hold of a listener: each connection's
// time to send a request, to be answered, and to sit idle between requests,
// and how many connections are served at once (more wait in the kernel's
// accept queue until one closes).
type httpLimits struct {
	ReadTimeout  time.Duration // headers and body of one request
	WriteTimeout time.Duration // from the end of the headers to the end of the answer
	IdleTimeout  time.Duration // a keep-alive connection waiting for its next request
	MaxConns     int           // connections served at once
}

// adminLimits are the admin API's defaults. WriteTimeout outlasts the slowest
// handler, a reconcile that asks the provider within the channel's lease.
var adminLimits = httpLimits{ReadTimeout: 30 * time.Second, WriteTimeout: 2 * time.Minute, IdleTimeout: time.Minute, MaxConns: 256}

// maxHeaderWait bounds the time to send request headers, within ReadTimeout.
const maxHeaderWait = 10 * time.Second

// serveLimited serves h on ln within l until ctx ends, then shuts down within grace.
func serveLimited(ctx context.Context, ln net.Listener, h http.Handler, grace time.Duration, l httpLimits) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: min(maxHeaderWait, l.ReadTimeout),
		ReadTimeout:       l.ReadTimeout,
		WriteTimeout:      l.WriteTimeout,
		IdleTimeout:       l.IdleTimeout,
		MaxHeaderBytes:    64 << 10,
	}
	return runServer(ctx, srv, netutil.LimitListener(ln, l.MaxConns), grace)
}

// serveHTTP serves h on ln until ctx ends, then shuts down within grace.
func serveHTTP(ctx context.Context, ln net.Listener, h http.Handler, grace time.Duration) error {
	return runServer(ctx, &http.Server{Handler: h, ReadHeaderTimeout: maxHeaderWait}, ln, grace)
}

func runServer(ctx context.Context, srv *http.Server, ln net.Listener, grace time.Duration) error {
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return err
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
	}
	if err := <-errc; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
