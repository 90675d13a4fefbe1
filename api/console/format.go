package console

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/effectd/effectd/policy"
	"github.com/effectd/effectd/statemachine"
)

// errorExplains reports whether an intent's last error explains the status
// it is in now: why it waits for a retry, failed, is in doubt or was skipped.
// In the other states (SENDING, SENT, CANCELLED) the error is from before.
func errorExplains(s statemachine.State) bool {
	switch s {
	case statemachine.Pending, statemachine.Failed, statemachine.InDoubt, statemachine.Skipped:
		return true
	}
	return false
}

// zeroMeans says what a zero (or empty) value of a policy field means, for
// the fields where it is not a number of something.
var zeroMeans = map[string]string{
	"max_age":         "no limit",
	"rate_per_second": "no limit",
	"delivery_poll":   "never",
	"sweep.every":     "off",
	"sweep.window":    "as every",
}

// policyValue writes a policy field's JSON value as a person reads it:
// durations as 1h or 15 days (360h), numbers and words bare, lists joined
// with commas, and a zero that means "no limit" or "never" as those words.
func policyValue(name string, raw json.RawMessage) string {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if dec.Decode(&v) != nil {
		return string(raw)
	}
	zero, hasZero := zeroMeans[name]
	switch x := v.(type) {
	case string:
		d, err := time.ParseDuration(x)
		switch {
		case err != nil:
			return x
		case d == 0 && hasZero:
			return zero
		}
		return humanDuration(d)
	case json.Number:
		if f, err := x.Float64(); err == nil && f == 0 && hasZero {
			return zero
		}
		return x.String()
	case []any:
		if len(x) == 0 {
			return cmp.Or(zero, "none")
		}
		items := make([]string, len(x))
		for i, it := range x {
			b, _ := json.Marshal(it)
			items[i] = policyValue("", b)
		}
		return strings.Join(items, ", ")
	}
	return string(raw)
}

// humanDuration writes d as policy.Duration.Short does, with whole days
// spelled out too: "30s", "1h30m", "15 days (360h)".
func humanDuration(d time.Duration) string {
	s := policy.Duration(d).Short()
	const day = 24 * time.Hour
	if d < day || d%day != 0 {
		return s
	}
	n := int64(d / day)
	if n == 1 {
		return "1 day (" + s + ")"
	}
	return fmt.Sprintf("%d days (%s)", n, s)
}
