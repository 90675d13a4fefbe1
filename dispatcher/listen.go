package dispatcher

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/effectd/effectd/internal/query/intentdb"
)

// listenRetry is how long the listener waits before reconnecting after its
// connection broke; the claimer polls meanwhile.
const listenRetry = time.Second

// listener holds a connection that LISTENs for effectd_wakeup and wakes the
// claimer on each notification, reconnecting when it breaks. Notifications
// only arrive while some dispatcher has said it waits (the claimer's
// setWaiting).
type listener struct {
	loop
	d *Dispatcher
}

// Start listens until Stop.
func (l *listener) Start(ctx context.Context) { l.start(ctx, l.run) }

// Stop closes the connection and waits for the loop to end.
func (l *listener) Stop() { l.stop() }

func (l *listener) run(ctx context.Context) {
	for ctx.Err() == nil {
		err := l.listenOnce(ctx)
		if ctx.Err() != nil {
			return
		}
		l.d.log.Warn("wake-up listener lost; polling until it is back", "error", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(listenRetry):
		}
	}
}

func (l *listener) listenOnce(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, l.d.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	if err := intentdb.ListenWakeup(ctx, conn); err != nil {
		return err
	}
	for {
		if _, err := conn.WaitForNotification(ctx); err != nil {
			return err
		}
		poke(l.d.wake)
	}
}
