package console

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/effectd/effectd/api/client"
)

// TestTimeline: attempts, provider events and audit entries become one
// list, oldest first; operator attempts are left to their audit entry, which
// says who and why.
func TestTimeline(t *testing.T) {
	t.Parallel()
	at := func(s int) time.Time { return time.Date(2026, 11, 30, 12, 0, s, 0, time.UTC) }
	str := func(s string) *string { return &s }
	d := client.IntentDetail{
		Attempts: []client.Attempt{
			{Attempt: 1, Kind: "send", StartedAt: at(1), Outcome: "maybe_sent", Error: str("timeout")},
			{Attempt: 1, Kind: "lookup", StartedAt: at(3), Outcome: "ambiguous"},
			{Attempt: 1, Kind: "operator", StartedAt: at(5), Outcome: "resolve_sent"},
		},
		Audit: []client.AuditEntry{{At: at(5), Actor: "oncall", Action: "intent.resolve_sent",
			Before: json.RawMessage(`{"status":"IN_DOUBT"}`), After: json.RawMessage(`{"status":"SENT","reason":"seen in the log","snapshot":"s-1"}`)}},
	}
	events := []client.ProviderEvent{{Provider: "twilio", Type: "undelivered", ReceivedAt: at(7), Delivery: str("undelivered"),
		Detail: str("undelivered 30003"), Outcome: "applied", ObjectRef: str("SM1")}}
	got := timeline(d, events)
	var lines []string
	for _, it := range got {
		lines = append(lines, it.Kind+"|"+it.Title+"|"+it.Actor+"|"+it.Reason+"|"+it.Detail+"|"+it.Ref)
	}
	want := []string{
		"send|send #1: maybe_sent|||timeout|",
		"lookup|lookup #1: ambiguous||||",
		"audit|intent.resolve_sent: IN_DOUBT → SENT|oncall|seen in the log|bulk snapshot s-1|",
		"provider event|twilio undelivered|||provider code 30003 · outcome applied|SM1",
	}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("timeline:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
	if !got[0].Failure || !got[3].Failure || got[1].Failure {
		t.Errorf("failures marked: %v %v %v, want the send and the undelivered event", got[0].Failure, got[1].Failure, got[3].Failure)
	}
}
