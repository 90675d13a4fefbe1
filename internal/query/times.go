package query

import (
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgtype"
)

// The instants effectd carries: RFC 3339, and so JSON, has four-digit years.
// effectd.enqueue refuses times outside them; a row that holds one anyway (from
// before that check, or written past effectd.enqueue) is read without failing.
var (
	minTime = time.Date(1, 1, 1, 0, 0, 0, 0, time.UTC)
	maxTime = time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC)
)

// LooseTime is a timestamptz scan target that never fails: a value Go and JSON
// cannot carry (infinity, a year past 9999) is clamped into range and
// described in Problem. NULL leaves Valid false.
type LooseTime struct {
	Field   string // the column, named in Problem
	Time    time.Time
	Valid   bool
	Problem string
}

// ScanTimestamptz implements pgtype.TimestamptzScanner.
func (l *LooseTime) ScanTimestamptz(v pgtype.Timestamptz) error {
	l.Time, l.Valid, l.Problem = time.Time{}, v.Valid, ""
	if !v.Valid {
		return nil
	}
	switch {
	case v.InfinityModifier == pgtype.Infinity:
		l.Time, l.Problem = maxTime, l.Field+" is infinity"
	case v.InfinityModifier == pgtype.NegativeInfinity:
		l.Time, l.Problem = minTime, l.Field+" is -infinity"
	case v.Time.Before(minTime):
		l.Time, l.Problem = minTime, fmt.Sprintf("%s is before the year 1 (%s)", l.Field, v.Time.UTC().Format("2006-01-02"))
	case v.Time.After(maxTime):
		l.Time, l.Problem = maxTime, fmt.Sprintf("%s is past the year 9999 (year %d)", l.Field, v.Time.UTC().Year())
	case v.Time.Year() < 1 || v.Time.Year() > 9999:
		l.Time = v.Time.UTC() // in range, but not in the local zone
	default:
		l.Time = v.Time
	}
	return nil
}

// Ptr returns the time, or nil for NULL.
func (l *LooseTime) Ptr() *time.Time {
	if !l.Valid {
		return nil
	}
	t := l.Time
	return &t
}

// problems returns the problems of ts, in order, or nil.
func problems(ts ...*LooseTime) []string {
	var out []string
	for _, t := range ts {
		if t.Problem != "" {
			out = append(out, t.Problem+": Go and JSON cannot carry it; shown as "+t.Time.UTC().Format(time.RFC3339))
		}
	}
	return out
}

// Interval is d as a PostgreSQL interval parameter.
func Interval(d time.Duration) pgtype.Interval {
	return pgtype.Interval{Microseconds: d.Microseconds(), Valid: true}
}

// NullString is s, or NULL when s is "".
func NullString(s string) *string {
	if s == "" {
		return nil
	}
	return &s
}
