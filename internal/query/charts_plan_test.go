package query

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// chartHistorySetup is eight days of minute rollups and latency slots of
// three channels and of the whole system, and 30,000 audit entries over those
// days, analyzed: the history a chart's read must not read beyond its range.
var chartHistorySetup = []string{
	`INSERT INTO effectd.minute_rollups (channel, minute, sent, failed, backlog, oldest_due_seconds)
	 SELECT c, date_trunc('minute', now()) - m * interval '1 minute', 10, 1, 5, 3
	 FROM unnest(ARRAY['sms', 'refund', 'mail', '*']) c, generate_series(0, 8 * 1440) m`,
	`INSERT INTO effectd.minute_latency (channel, minute, slot, n)
	 SELECT c, date_trunc('minute', now()) - m * interval '1 minute', s, 2
	 FROM unnest(ARRAY['sms', 'refund', 'mail', '*']) c, generate_series(0, 8 * 1440) m, generate_series(18, 20) s`,
	`INSERT INTO effectd.audit (at, actor, action, channel)
	 SELECT now() - n * interval '23 seconds', 'ops', 'channel.pause', (ARRAY['sms', 'refund', 'mail'])[n % 3 + 1]
	 FROM generate_series(1, 30000) n`,
	`ANALYZE effectd.minute_rollups`, `ANALYZE effectd.minute_latency`, `ANALYZE effectd.audit`,
}

// TestChartReadsOnlyItsRange: each read behind a chart (its points, its
// latency slots, its audit marks of every channel or of one) reads the rows
// of its range alone, through an index, whatever the days kept before it: no
// sequential scan, no thousands of rows read and thrown away.
func TestChartReadsOnlyItsRange(t *testing.T) {
	to := time.Now().UTC().Truncate(time.Minute).Add(time.Minute)
	from := to.Add(-time.Hour)
	step := pgtype.Interval{Microseconds: 60e6, Valid: true}
	for _, c := range []struct {
		name, sql, index string
		most             int // the rows of the range: an hour's minutes, slots or entries
		args             []any
	}{
		{"points of sms", chartPointsSQL, "minute_rollups_pkey", 60, []any{[]string{"sms"}, from, to, step}},
		{"points of the whole system", chartPointsSQL, "minute_rollups_pkey", 60, []any{[]string{AllChannels}, from, to, step}},
		{"latency of sms", chartLatencySQL, "minute_latency_pkey", 3 * 60, []any{[]string{"sms"}, from, to, step}},
		{"marks of every channel", chartMarksSQL, "audit_at", 3600 / 23, []any{from, to, 200}},
		{"marks of sms", chartMarksChannelsSQL, "audit_at|audit_channel_at", 3600 / 23, []any{[]string{"sms"}, from, to, 200}},
	} {
		plan := explain(t, chartHistorySetup, "(ANALYZE, COSTS OFF, TIMING OFF) "+c.sql, c.args...)
		read := regexp.MustCompile(`Index Scan(?: Backward)? (?:using|on) (?:` + c.index + `)[^\n]*actual rows=(\d+)`).FindStringSubmatch(plan)
		rows := 0
		if read != nil {
			rows, _ = strconv.Atoi(read[1])
		}
		if read == nil || rows > c.most+1 || strings.Contains(plan, "Seq Scan") || regexp.MustCompile(`Rows Removed by Filter: \d{4,}`).MatchString(plan) {
			t.Errorf("%s: the plan does not read the range alone (at most %d rows) through %s:\n%s", c.name, c.most+1, c.index, plan)
		}
	}
}
