package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"time"
)

// startup: a backlog waits, then `effectd serve` is started; the time from
// its exec to the first call the sandbox receives, and to the first 200 from
// /readyz, over several starts (each on a fresh database).
func (e *env) startup(ctx context.Context) error {
	runs := max(e.opt.StartupRuns, 1)
	var first, ready []time.Duration
	for range runs {
		f, r, err := e.startOnce(ctx)
		if err != nil {
			return err
		}
		first, ready = append(first, f), append(ready, r)
	}
	fmt.Fprintf(e.out, "startup: %d intents waiting (+5%% redelivered), then effectd serve started; %d starts, each on a fresh database\n",
		e.opt.StartupEvents, runs)
	fmt.Fprintf(e.out, "  exec → first provider call: %s\n", spread(first))
	fmt.Fprintf(e.out, "  exec → /readyz answers 200: %s\n", spread(ready))
	return nil
}

// spread formats min / median / max in milliseconds.
func spread(d []time.Duration) string {
	s := slices.Clone(d)
	slices.Sort(s)
	return fmt.Sprintf("min %.0f ms, median %.0f ms, max %.0f ms", ms(s[0]), ms(s[len(s)/2]), ms(s[len(s)-1]))
}

// startOnce enqueues the backlog, starts serve on a known port, and measures
// exec → first call and exec → ready; then stops serve (the backlog need not drain).
func (e *env) startOnce(ctx context.Context) (firstCall, ready time.Duration, err error) {
	url, pool, cfg, err := e.fresh(ctx, e.opt.Concurrency, "")
	if err != nil {
		return 0, 0, err
	}
	defer pool.Close()
	prefix := fmt.Sprintf("st%d-", e.seq)
	if _, _, err := e.backlog(ctx, pool, prefix, e.opt.StartupEvents); err != nil {
		return 0, 0, err
	}
	var firstAt atomic.Int64
	seen := func(key string, at time.Time) {
		if strings.HasPrefix(key, "bench:"+prefix) {
			firstAt.CompareAndSwap(0, at.UnixNano())
		}
	}
	e.onCall.Store(&seen)
	defer e.onCall.Store(nil)
	addr, err := freeAddr()
	if err != nil {
		return 0, 0, err
	}
	// Poll /readyz from before the exec: the first 200 is when it became ready.
	readyAt := make(chan time.Time, 1)
	pollCtx, stopPoll := context.WithTimeout(ctx, 30*time.Second)
	defer stopPoll()
	go func() {
		client := &http.Client{Timeout: time.Second}
		for pollCtx.Err() == nil {
			resp, err := client.Get("http://" + addr + "/readyz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					readyAt <- time.Now()
					return
				}
			}
			time.Sleep(time.Millisecond) // polling a port that is not yet open
		}
	}()
	in, err := e.serveAt(ctx, url, cfg, addr, false)
	if err != nil {
		return 0, 0, err
	}
	defer in.stop()
	var at time.Time
	select {
	case at = <-readyAt:
	case <-pollCtx.Done():
		return 0, 0, fmt.Errorf("/readyz did not answer 200 within 30s")
	}
	for firstAt.Load() == 0 {
		if pollCtx.Err() != nil {
			return 0, 0, fmt.Errorf("no provider call within 30s of starting serve")
		}
		time.Sleep(time.Millisecond)
	}
	return time.Unix(0, firstAt.Load()).Sub(in.exec), at.Sub(in.exec), nil
}

// freeAddr returns a loopback address with a port free at the moment.
func freeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer ln.Close()
	return ln.Addr().String(), nil
}
