package intentdb

import (
	"context"
	_ "embed"
	"strings"
	"time"

	"github.com/effectd/effectd/internal/query"
)

// effectd.wakeup and the effectd_wakeup channel: how a producer's commit wakes
// an idle dispatcher.

//go:embed set_waiting.sql
var setWaitingSQL string

//go:embed listen_wakeup.sql
var listenWakeupSQL string

// listenWakeup is listen_wakeup.sql without its comment, so that
// pg_stat_activity shows a listening connection as exactly
// "LISTEN effectd_wakeup".
var listenWakeup = withoutComments(listenWakeupSQL)

// SetWaiting says whether effectd.enqueue NOTIFYs effectd_wakeup on commit:
// true while a dispatcher waits for work, for at most holdFor unless set
// again. A flag left set by a dispatcher that stopped or died would have made
// every producer's commit NOTIFY, and such commits run one at a time.
func SetWaiting(ctx context.Context, db query.DB, waiting bool, holdFor time.Duration) error {
	_, err := db.Exec(ctx, setWaitingSQL, waiting, query.Interval(holdFor))
	return err
}

// ListenWakeup LISTENs for effectd_wakeup on db, a connection of its own.
func ListenWakeup(ctx context.Context, db query.DB) error {
	_, err := db.Exec(ctx, listenWakeup)
	return err
}

// withoutComments returns sql without its "--" comment lines, trimmed.
func withoutComments(sql string) string {
	var b strings.Builder
	for _, l := range strings.Split(sql, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "--") {
			b.WriteString(l)
			b.WriteString("\n")
		}
	}
	return strings.TrimSpace(b.String())
}
