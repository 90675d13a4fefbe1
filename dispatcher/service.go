package dispatcher

import (
	"context"
	"time"
)

// service is one of the dispatcher's background loops. Start runs it and
// returns at once; Stop ends it and returns once it has ended.
type service interface {
	Start(ctx context.Context)
	Stop()
}

// loop is the lifecycle the services share: start runs fn in one goroutine
// with a context that stop cancels; stop waits for fn to return. Stopping a
// loop that never started does nothing.
type loop struct {
	cancel context.CancelFunc
	done   chan struct{}
}

func (l *loop) start(ctx context.Context, fn func(context.Context)) {
	ctx, l.cancel = context.WithCancel(ctx)
	l.done = make(chan struct{})
	go func() {
		defer close(l.done)
		fn(ctx)
	}()
}

func (l *loop) stop() {
	if l.cancel == nil {
		return
	}
	l.cancel()
	<-l.done
}

// every runs fn each interval, and when wake fires, until ctx ends.
func every(ctx context.Context, interval time.Duration, wake <-chan struct{}, fn func()) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-wake:
		}
		fn()
	}
}

// poke signals c without blocking: c holds at most one pending signal.
func poke(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// logDB logs a database error unless the dispatcher is stopping.
func (d *Dispatcher) logDB(ctx context.Context, op string, err error, args ...any) {
	if ctx.Err() != nil {
		return
	}
	d.log.Warn(op, append(args, "error", err)...)
}
