package dispatcher

import (
	"context"
	"testing"
	"unicode/utf8"

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
