package query

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectd/effectd/internal/pgtest"
)

// TestLooseTime: every timestamptz scans, and one Go cannot carry is clamped
// And named.
func TestLooseTime(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	cases := []struct {
		sql     string
		want    time.Time
		problem string
	}{
		{"'2026-11-30 12:00:00+00'", time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC), ""},
		{"'infinity'", maxTime, "x is infinity"},
		{"'-infinity'", minTime, "x is -infinity"},
		{"'12000-01-01 00:00:00+00'", maxTime, "x is past the year 9999 (year 12000)"},
		{"'0044-03-15 00:00:00+00 BC'", minTime, "x is before the year 1"},
		{"'9999-12-31 23:00:00+00'", time.Date(9999, 12, 31, 23, 0, 0, 0, time.UTC), ""},
	}
	for _, c := range cases {
		lt := LooseTime{Field: "x"}
		if err := pool.QueryRow(context.Background(), `SELECT `+c.sql+`::timestamptz`).Scan(&lt); err != nil {
			t.Errorf("%s: %v", c.sql, err)
			continue
		}
		if !lt.Valid || !lt.Time.Equal(c.want) || !strings.HasPrefix(lt.Problem, c.problem) || (c.problem == "") != (lt.Problem == "") {
			t.Errorf("%s: %v %v %q; want %v %q", c.sql, lt.Valid, lt.Time, lt.Problem, c.want, c.problem)
		}
		if _, err := lt.Time.MarshalJSON(); err != nil {
			t.Errorf("%s: %v does not marshal: %v", c.sql, lt.Time, err)
		}
	}
	var null LooseTime
	if err := null.ScanTimestamptz(pgtype.Timestamptz{}); err != nil || null.Valid || null.Ptr() != nil {
		t.Errorf("NULL: %+v, %v", null, err)
	}
}
