package query

import (
	_ "embed"
	"strings"
)

// SetWaiting sets effectd.wakeup.waiting to $1: whether effectd.enqueue
// NOTIFYs effectd_wakeup on commit.
//
//go:embed set_waiting.sql
var SetWaiting string

//go:embed listen_wakeup.sql
var listenWakeupSQL string

// ListenWakeup LISTENs for effectd_wakeup. It is the statement without its
// comment, so that pg_stat_activity shows a listening connection as exactly
// "LISTEN effectd_wakeup".
var ListenWakeup = withoutComments(listenWakeupSQL)

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
