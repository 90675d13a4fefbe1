package chaos

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/query"
	"github.com/effectd/effectd/providers/effect"
	"github.com/effectd/effectd/providers/sandbox"
)

// TestCompareSweeps: the sweep's findings must be exactly what the ledger and
// the table account for; an orphan it misses, a duplicate it invents, and any
// finding but a duplicate after a synchronous failover are violations naming
// the event and reference.
func TestCompareSweeps(t *testing.T) {
	sms := func(ev string, i int, ref string) sandbox.Effect {
		b, _ := json.Marshal(map[string]string{"to": smsNumber(i), "body": "sms-lookup " + ev})
		return sandbox.Effect{Kind: "twilio", Key: ref, Ref: ref, Applied: 1, Body: b}
	}
	refund := func(ev, intent, ref string) sandbox.Effect {
		b, _ := json.Marshal(map[string]any{"metadata": map[string]string{effect.MetaEventID: ev, effect.MetaIntentID: intent}})
		return sandbox.Effect{Kind: "stripe", Key: "refund:" + ev, Ref: ref, Applied: 1, Body: b}
	}
	ledger := sandbox.Snapshot{Effects: []sandbox.Effect{
		sms("evt-1", 1, "SM1"),                           // SENT once: nothing
		sms("evt-2", 2, "SM2a"), sms("evt-2", 2, "SM2b"), // sent twice: a duplicate
		sms("evt-3", 3, "SM3"),       // its intent lost: an orphan
		refund("evt-4", "4", "re_4"), // its intent lost: an orphan
		refund("evt-5", "5", "re_5"),
		refund("evt-6", "60", "re_6"), // created for a lost intent 60, the event enqueued again as 6: an orphan
	}}
	intents := []query.IntentTally{
		{ID: 1, EventID: "evt-1", Channel: "sms-lookup", Status: "SENT", ProviderRef: "SM1"},
		{ID: 2, EventID: "evt-2", Channel: "sms-lookup", Status: "SENT", ProviderRef: "SM2a"},
		{ID: 5, EventID: "evt-5", Channel: "refund", Status: "SENT", ProviderRef: "re_5"},
		{ID: 6, EventID: "evt-6", Channel: "refund", Status: "FAILED"}, // Stripe refused its key with other metadata
	}
	chans := []Channel{Channels[0], Channels[1], Channels[2]} // hook (not swept), refund, sms-lookup
	finding := func(kind, ev, ref string) effectdtype.Finding {
		return effectdtype.Finding{Kind: kind, EventID: ev, Objects: []effect.Object{{Ref: ref}}}
	}
	right := []effectdtype.SweepReport{
		{Channel: "refund", Findings: []effectdtype.Finding{finding("orphan", "evt-4", "re_4"), finding("orphan", "evt-6", "re_6")}},
		{Channel: "sms-lookup", Findings: []effectdtype.Finding{finding("orphan", "", "SM3"), finding("duplicate", "evt-2", "SM2b")}},
	}
	rows, vs := compareSweeps(right, intents, ledger, chans, false)
	if len(vs) > 0 {
		t.Errorf("matching sweeps: violations %+v", vs)
	}
	if len(rows) != 2 || rows[1].Found["orphan"] != 1 || rows[1].Expected["duplicate"] != 1 || rows[0].Expected["orphan"] != 2 || rows[0].Expected["unsettled"] != 0 {
		t.Errorf("rows = %+v", rows)
	}

	wrong := []effectdtype.SweepReport{
		{Channel: "refund", Findings: []effectdtype.Finding{finding("duplicate", "evt-5", "re_5"), finding("orphan", "evt-6", "re_6")}},
		{Channel: "sms-lookup", Findings: []effectdtype.Finding{finding("duplicate", "evt-2", "SM2b")}},
	}
	_, vs = compareSweeps(wrong, intents, ledger, chans, false)
	got := map[string]string{}
	for _, v := range vs {
		got[v.Channel+" "+v.Rule] = strings.Join(v.Keys, " ")
	}
	want := map[string]string{
		"refund sweep: duplicate finding the checker does not account for": "evt-5",
		"refund sweep: no orphan finding where the checker counts one":     "evt-4/re_4",
		"sms-lookup sweep: no orphan finding where the checker counts one": "evt-3/SM3",
	}
	if len(got) != len(want) {
		t.Errorf("violations %v, want %v", got, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: %q, want %q", k, got[k], w)
		}
	}

	_, vs = compareSweeps(right, intents, ledger, chans, true)
	n := 0
	for _, v := range vs {
		if strings.Contains(v.Rule, "after a synchronous failover") {
			n++
		}
	}
	if n != 2 {
		t.Errorf("synchronous: %d channels flagged for their findings, want 2: %+v", n, vs)
	}
}
