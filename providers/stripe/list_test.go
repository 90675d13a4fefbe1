package stripe

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/effectd/effectd/providers/sandbox"
)

// TestList: List reads every page of refunds, payment intents and transfers
// created in the window and keeps those carrying effectd_event_id, each with
// its metadata; a window before or after them lists nothing.
func TestList(t *testing.T) {
	t.Parallel()
	s := sandbox.New(sandbox.Options{})
	srv := httptest.NewServer(s.Handler())
	t.Cleanup(srv.Close)
	p, err := New(Config{APIKey: "sk_test_effectd", BaseURL: srv.URL, Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	var want []string
	for i := range 130 { // more than a page of 100
		ref, err := p.Send(ctx, fmt.Sprint("ch:r", i), json.RawMessage(refundPayload), meta(fmt.Sprint("r", i)))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, ref)
	}
	for _, pl := range []string{
		`{"type":"payment_intent","amount":1200,"currency":"usd","customer":"cus_1"}`,
		`{"type":"transfer","amount":700,"currency":"usd","destination":"acct_1"}`,
	} {
		ref, err := p.Send(ctx, "ch:"+pl, json.RawMessage(pl), meta("x-"+pl[9:14]))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, ref)
	}
	// Not ours: no effectd metadata.
	req, _ := http.NewRequest("POST", srv.URL+"/v1/refunds", strings.NewReader(url.Values{"charge": {"ch_other"}}.Encode()))
	req.Header.Set("Authorization", "Bearer sk_test_other")
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	if resp, err := http.DefaultClient.Do(req); err != nil || resp.StatusCode != 200 {
		t.Fatalf("a refund without metadata: %v %v", resp, err)
	}
	if n := len(s.Ledger.Snapshot("stripe").Effects); n != 133 {
		t.Fatalf("%d effects at the sandbox, want 133", n)
	}

	objs, err := p.List(ctx, start.Add(-time.Minute), time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, o := range objs {
		got = append(got, o.Ref)
		if o.EventID == "" || o.IntentID != "42" || o.Created.Before(start.Add(-2*time.Second)) || o.Summary == "" || o.Kind == "" {
			t.Errorf("listed %+v: want its metadata, kind, created and summary", o)
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("listed %d objects, want the %d carrying effectd's metadata", len(got), len(want))
	}
	for _, w := range [][2]time.Time{{start.Add(-2 * time.Hour), start.Add(-time.Hour)}, {time.Now().Add(time.Hour), time.Now().Add(2 * time.Hour)}} {
		if objs, err := p.List(ctx, w[0], w[1]); err != nil || len(objs) != 0 {
			t.Errorf("List(%v, %v) = %d objects, %v; want none", w[0], w[1], len(objs), err)
		}
	}
	if m, listed := p.Match(json.RawMessage(refundPayload)); m != "" || !listed {
		t.Errorf("Match = %q, %v; want metadata matching and listed", m, listed)
	}
}
