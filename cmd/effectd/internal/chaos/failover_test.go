package chaos

import (
	"strings"
	"testing"
	"time"
)

// TestReadinessRules: a rule of how effectd followed a promotion names what
// was measured against its bound: the last instance ready 14.2 s after the
// promotion breaks "within 10s", though both answered.
func TestReadinessRules(t *testing.T) {
	fr := &FailoverReport{Ready: 14211 * time.Millisecond, FirstCall: 776 * time.Millisecond, Unanswered: 22}
	got := strings.Join(fr.readinessRules(2, 2, true), "\n")
	want := "2 of 2 instances answered /readyz 200 after the promotion, the last 14.211s after it: want every one within 10s\n" +
		"/readyz never answered 503 while no primary was writable (22 asked then got no answer within 2s)"
	if got != want {
		t.Errorf("rules:\n%s\nwant:\n%s", got, want)
	}
	fr = &FailoverReport{Ready: 3 * time.Second, FirstCall: time.Second, NotReady: 4}
	if rules := fr.readinessRules(2, 2, true); len(rules) != 0 {
		t.Errorf("a failover followed in time: %q", rules)
	}
}
