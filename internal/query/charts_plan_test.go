package query

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectd/effectd/effectdtype"
)

// chartHistorySetup is eight days of minute rollups and latency slots of
// three channels and of the whole system, the same days' hour rollups of
// those and 36 more channels (a table of hours is small: with four channels
// a scan of all of it is the cheaper plan), and 30,000 audit entries over
// those days, analyzed: the history a chart's read must not read beyond its
// range.
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
	`INSERT INTO effectd.hour_rollups (channel, hour, sent, failed, backlog, oldest_due_seconds)
	 SELECT c, date_trunc('hour', now(), 'UTC') - h * interval '1 hour', 600, 60, 5, 3
	 FROM unnest(ARRAY['sms', 'refund', 'mail', '*'] || array(SELECT 'c' || n FROM generate_series(1, 36) n)) c,
	      generate_series(0, 8 * 24) h`,
	`INSERT INTO effectd.hour_latency (channel, hour, slot, n)
	 SELECT c, date_trunc('hour', now(), 'UTC') - h * interval '1 hour', s, 120
	 FROM unnest(ARRAY['sms', 'refund', 'mail', '*'] || array(SELECT 'c' || n FROM generate_series(1, 36) n)) c,
	      generate_series(0, 8 * 24) h, generate_series(18, 20) s`,
	`ANALYZE effectd.minute_rollups`, `ANALYZE effectd.minute_latency`, `ANALYZE effectd.audit`,
	`ANALYZE effectd.hour_rollups`, `ANALYZE effectd.hour_latency`,
}

// readsRange fails the test unless plan reads at most most rows (and one
// more) through index, with no sequential scan and no thousands of rows
// thrown away by a filter.
func readsRange(t *testing.T, name, plan, index string, most int) {
	t.Helper()
	read := regexp.MustCompile(`Index Scan(?: Backward)? (?:using|on) (?:` + index + `)[^\n]*actual rows=(\d+)`).FindStringSubmatch(plan)
	rows := 0
	if read != nil {
		rows, _ = strconv.Atoi(read[1])
	}
	if read == nil || rows > most+1 || strings.Contains(plan, "Seq Scan") || regexp.MustCompile(`Rows Removed by Filter: \d{4,}`).MatchString(plan) {
		t.Errorf("%s: the plan does not read the range alone (at most %d rows) through %s:\n%s", name, most+1, index, plan)
	}
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
		readsRange(t, c.name, plan, c.index, c.most)
	}
}

// TestChartLongRangesReadHours: the 24 h and 7 d charts read the statements
// ChartRows picks for their step, and those read the hour rollups of the
// range alone: 24 or 168 rows a channel (three latency slots each), not the
// 1,440 or 10,080 minutes under them.
func TestChartLongRangesReadHours(t *testing.T) {
	for _, name := range []string{"24h", "7d"} {
		rg := effectdtype.ChartRanges[name]
		to := time.Now().UTC().Truncate(rg.Step).Add(rg.Step)
		from := to.Add(-rg.Range)
		hours := int(rg.Range / time.Hour)
		step := pgtype.Interval{Microseconds: rg.Step.Microseconds(), Valid: true}
		pointsSQL, latencySQL := chartSQL(rg.Step)
		for _, c := range []struct {
			name, sql, index string
			most             int
			channels         []string
		}{
			{"points of sms", pointsSQL, "hour_rollups_pkey", hours, []string{"sms"}},
			{"points of the whole system", pointsSQL, "hour_rollups_pkey", hours, []string{AllChannels}},
			{"latency of sms", latencySQL, "hour_latency_pkey", 3 * hours, []string{"sms"}},
		} {
			plan := explain(t, chartHistorySetup, "(ANALYZE, COSTS OFF, TIMING OFF) "+c.sql, c.channels, from, to, step)
			readsRange(t, name+", "+c.name, plan, c.index, c.most)
		}
	}
}
