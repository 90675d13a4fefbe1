package twilio_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/providers/sandbox"
	"github.com/effectd/effectd/providers/twilio"
)

var _ dispatcher.Lister = (*twilio.Provider)(nil)

// TestList: List returns the messages of the channel's sender created in the
// window, sent or still queued, each with its recipient and body as Match, and
// not another sender's; a window before them lists nothing. Match says a
// payload from another sender is not covered.
func TestList(t *testing.T) {
	t.Parallel()
	for _, queue := range []time.Duration{0, time.Hour} { // sent at once; queued for the whole test
		p, s := setup(t, nil)
		s.SetTwilioQueueDelay(queue)
		ctx := context.Background()
		start := time.Now()
		var want []string
		for _, m := range []json.RawMessage{sms(testTo, "one"), sms(testTo, "two"), sms("+15551234568", "one")} {
			ref, err := p.Send(ctx, "", m, meta)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, ref)
		}
		// Another sender on the same account: not the channel's.
		if _, err := p.Send(ctx, "", json.RawMessage(`{"to":"`+testTo+`","body":"elsewhere","from":"+15005550008"}`), meta); err != nil {
			t.Fatal(err)
		}
		objs, err := p.List(ctx, start.Add(-time.Minute), time.Now().Add(time.Minute))
		if err != nil {
			t.Fatalf("queue %v: %v", queue, err)
		}
		var got []string
		for _, o := range objs {
			got = append(got, o.Ref)
			if o.Kind != "message" || o.EventID != "" || !strings.HasPrefix(o.Summary, "message to +*******") {
				t.Errorf("queue %v: listed %+v", queue, o)
			}
		}
		slices.Sort(got)
		slices.Sort(want)
		if !slices.Equal(got, want) {
			t.Errorf("queue %v: listed %v, want the channel sender's %v", queue, got, want)
		}
		matched := 0
		m, _ := p.Match(sms(testTo, "two"))
		for _, o := range objs {
			if o.Match == m {
				matched++
			}
		}
		if matched != 1 {
			t.Errorf("queue %v: %d listed messages match %q, want 1", queue, matched, "two")
		}
		if objs, err := p.List(ctx, start.Add(-2*time.Hour), start.Add(-time.Hour)); err != nil || len(objs) != 0 {
			t.Errorf("queue %v: a window before the messages lists %d, %v", queue, len(objs), err)
		}
	}
	p, _ := setup(t, nil)
	if _, listed := p.Match(json.RawMessage(`{"to":"` + testTo + `","body":"x","from":"+15005550008"}`)); listed {
		t.Errorf("Match of a payload from another sender: listed, want not covered")
	}
	if _, listed := p.Match(sms(testTo, "x")); !listed {
		t.Errorf("Match of a payload from the channel's sender: not listed")
	}
}

// TestListMessageSentBetweenItsListings: a message still queued when List
// reads the messages sent in the window, and sent by the time it reads the
// newest ones, is listed: it is in neither listing as the other sees it. Seen
// in a sweep of a test under load, which found the two SMS it had just sent
// missing.
func TestListMessageSentBetweenItsListings(t *testing.T) {
	t.Parallel()
	s := sandbox.New(sandbox.Options{})
	s.SetTwilioQueueDelay(time.Hour)
	sandboxed := s.Handler()
	var lists atomic.Int32
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sandboxed.ServeHTTP(w, r)
		if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/Messages.json") && lists.Add(1) == 1 {
			s.SetTwilioQueueDelay(0) // sent now, after the listing of the sent ones
		}
	}))
	t.Cleanup(ts.Close)
	p, err := twilio.New(twilio.Config{AccountSID: testAccount, AuthToken: "secret", From: testFrom, BaseURL: ts.URL, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	start := time.Now()
	ref, err := p.Send(ctx, "", sms(testTo, "between"), meta)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := p.List(ctx, start.Add(-time.Minute), time.Now().Add(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	if lists.Load() != 2 {
		t.Fatalf("List read Messages.json %d times, want 2 (the sent, then the newest)", lists.Load())
	}
	if len(objs) != 1 || objs[0].Ref != ref {
		t.Fatalf("listed %+v, want the message %s", objs, ref)
	}
}
