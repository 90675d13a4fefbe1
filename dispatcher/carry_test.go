package dispatcher

import (
	"context"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgtype"

	"github.com/effectd/effectd/internal/pgtest"
)

// TestHeaderRuleMatchesSQL: the Go rule the claim quarantines by and the SQL
// rule effectd.enqueue refuses by give the same verdict for every code point
// of the BMP's first 0x3100 and a few beyond, in the middle of a value and at
// either end.
func TestHeaderRuleMatchesSQL(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	ctx := context.Background()
	conn, err := pool.Acquire(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Release()
	if _, err := conn.Exec(ctx, `
CREATE FUNCTION pg_temp.refused(v text) RETURNS boolean LANGUAGE plpgsql AS $$
BEGIN
    PERFORM effectd.check_header_text('event_id', v);
    RETURN false;
EXCEPTION WHEN invalid_parameter_value THEN
    RETURN true;
END $$`); err != nil {
		t.Fatal(err)
	}
	var values []string
	add := func(r rune) {
		c := string(r)
		values = append(values, "a"+c+"b", c+"b", "a"+c)
	}
	for r := rune(1); r < 0x3100; r++ {
		if utf8.ValidRune(r) {
			add(r)
		}
	}
	for _, r := range []rune{0xFEFF, 0xFFFD, 0x1F600, 0x10FFFF} {
		add(r)
	}
	var refused []bool
	if err := conn.QueryRow(ctx, `SELECT array_agg(pg_temp.refused(v) ORDER BY n) FROM unnest($1::text[]) WITH ORDINALITY AS t(v, n)`, values).Scan(&refused); err != nil {
		t.Fatal(err)
	}
	bad := 0
	for i, v := range values {
		if goRefuses := headerProblem("event_id", v) != ""; goRefuses != refused[i] {
			bad++
			if bad <= 10 {
				t.Errorf("%+q: SQL refuses %v, Go %v", v, refused[i], goRefuses)
			}
		}
	}
	if bad > 0 {
		t.Errorf("%d of %d values judged differently", bad, len(values))
	}
}

// TestLooseTime: every timestamptz scans, and one Go cannot carry is clamped
// and named.
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
		lt := looseTime{Field: "x"}
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
	var null looseTime
	if err := null.ScanTimestamptz(pgtype.Timestamptz{}); err != nil || null.Valid || null.ptr() != nil {
		t.Errorf("NULL: %+v, %v", null, err)
	}
}
