package readdb

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/internal/pgtest"
)

// chartHistory is a database holding eight days of minute rollups and
// latency slots of three channels and of the whole system, the same days'
// hour rollups of those and 36 more channels (a table of hours is small: with
// four channels a scan of all of it is the cheaper plan), and 30,000 audit
// entries over those days, analyzed: the history a chart's read must not read
// beyond its range.
func chartHistory(t *testing.T) *pgxpool.Pool {
	pool := pgtest.New(t)
	now := time.Now()
	minute, hour := now.Truncate(time.Minute), now.Truncate(time.Hour)
	channels := []string{"sms", "refund", "mail", AllChannels}
	fixture.AddMinuteRollups(t, pool, len(channels)*(8*1440+1), func(n int) fixture.Rollup {
		c, m := (n-1)%len(channels), (n-1)/len(channels)
		return fixture.Rollup{Channel: channels[c], At: minute.Add(-time.Duration(m) * time.Minute), Sent: 10,
			Failed: 1, Backlog: 5, OldestDueSeconds: 3, Latency: map[int]int64{18: 2, 19: 2, 20: 2}}
	})
	for n := range 36 {
		channels = append(channels, "c"+strconv.Itoa(n+1))
	}
	fixture.AddHourRollups(t, pool, len(channels)*(8*24+1), func(n int) fixture.Rollup {
		c, h := (n-1)%len(channels), (n-1)/len(channels)
		return fixture.Rollup{Channel: channels[c], At: hour.Add(-time.Duration(h) * time.Hour), Sent: 600,
			Failed: 60, Backlog: 5, OldestDueSeconds: 3, Latency: map[int]int64{18: 120, 19: 120, 20: 120}}
	})
	entries := make([]fixture.AuditEntry, 30000)
	for k := range entries {
		n := k + 1
		entries[k] = fixture.AuditEntry{At: now.Add(-time.Duration(n) * 23 * time.Second), Actor: "ops",
			Action: "channel.pause", Channel: []string{"sms", "refund", "mail"}[n%3]}
	}
	fixture.AddAudit(t, pool, entries...)
	if _, err := pool.Exec(context.Background(), `ANALYZE effectd.minute_rollups, effectd.minute_latency, effectd.audit,
		effectd.hour_rollups, effectd.hour_latency`); err != nil {
		t.Fatal(err)
	}
	return pool
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
	pool := chartHistory(t)
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
		plan := pgtest.Plan(t, pool, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) "+c.sql, c.args...)
		readsRange(t, c.name, plan, c.index, c.most)
	}
}

// TestChartLongRangesReadHours: the 24 h and 7 d charts read the statements
// ChartRows picks for their step, and those read the hour rollups of the
// range alone: 24 or 168 rows a channel (three latency slots each), not the
// 1,440 or 10,080 minutes under them.
func TestChartLongRangesReadHours(t *testing.T) {
	pool := chartHistory(t)
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
			plan := pgtest.Plan(t, pool, "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) "+c.sql, c.channels, from, to, step)
			readsRange(t, name+", "+c.name, plan, c.index, c.most)
		}
	}
}
