//go:build citus

package query

import (
	"context"
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
)

func TestCitusProbeTasks(t *testing.T) {
	pool := citusHistory(t, 32)
	ctx := context.Background()
	n := 3_200
	if os.Getenv("PROBE_N") != "" {
		fmt.Sscan(os.Getenv("PROBE_N"), &n)
	}
	if err := LoadHistoryBuckets(ctx, pool, History{From: 0, N: n, Final: n}, 32); err != nil {
		t.Fatal(err)
	}
	if err := VacuumHistory(ctx, pool); err != nil {
		t.Fatal(err)
	}
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	conn.Exec(ctx, `SET citus.max_adaptive_executor_pool_size = 1`)
	conn.Exec(ctx, `SET citus.explain_all_tasks = on`)
	qs := []string{`SELECT count(*) FROM effectd.intent_counts`, channelCountsBucketSQL, channelGaugesBucketSQL,
		`SELECT bucket, channel, status, count(*) FROM effectd.intents WHERE status = 'PENDING' GROUP BY 1, 2, 3`,
		`SELECT bucket, channel, status, count(*) FROM effectd.intents WHERE status IN ('PENDING', 'SENDING', 'IN_DOUBT') GROUP BY 1, 2, 3`}
	qs = append(qs, strings.Split(os.Getenv("PROBE_SQL"), ";;")...)
	for _, q := range qs {
		if strings.TrimSpace(q) == "" {
			continue
		}
		var args []any
		if strings.Contains(q, "$1") {
			args = []any{nil}
		}
		var lines []string
		for range 4 {
			rows, err := conn.Query(ctx, "EXPLAIN (ANALYZE, SUMMARY, COSTS OFF, TIMING OFF) "+q, args...)
			if err != nil {
				t.Fatal(err)
			}
			lines, _ = pgx.CollectRows(rows, pgx.RowTo[string])
		}
		plan := strings.Join(lines, "\n")
		var pl, ex float64
		for _, m := range regexp.MustCompile(`(Planning|Execution) Time: ([0-9.]+)`).FindAllStringSubmatch(plan, -1) {
			var v float64
			fmt.Sscan(m[2], &v)
			if m[1] == "Planning" {
				pl += v
			} else {
				ex += v
			}
		}
		t.Logf("%.60s…: planning %.1f ms, execution %.1f ms summed (incl. coordinator)\n%s", q, pl, ex, lines[len(lines)-2]+" "+lines[len(lines)-1])
		if os.Getenv("PROBE_PLAN") != "" {
			t.Log(plan[:min(len(plan), 6000)])
		}
	}
}
