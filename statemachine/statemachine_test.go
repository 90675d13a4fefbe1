package statemachine

import (
	"context"
	"errors"
	"testing"
)

// TestEveryPair checks Next against looplab/fsm for every (state, event) pair,
// and the handful of transitions the dispatcher's correctness rests on.
func TestEveryPair(t *testing.T) {
	ctx := context.Background()
	allowed := 0
	for _, s := range States {
		for _, ev := range Events {
			got, err := Next(s, ev)
			want, ferr := Apply(ctx, s, ev)
			if (err == nil) != (ferr == nil) {
				t.Fatalf("Next(%s, %s) err=%v, fsm err=%v", s, ev, err, ferr)
			}
			if err != nil {
				if !errors.Is(err, ErrTransition) {
					t.Fatalf("Next(%s, %s) = %v, want ErrTransition", s, ev, err)
				}
				continue
			}
			allowed++
			if got != want {
				t.Fatalf("Next(%s, %s) = %s, fsm says %s", s, ev, got, want)
			}
		}
	}
	if allowed != 24 {
		t.Fatalf("allowed pairs = %d, want 24: the table changed; update this test deliberately", allowed)
	}
}

func TestKeyTransitions(t *testing.T) {
	cases := []struct {
		from State
		ev   Event
		want State // "" means refused
	}{
		{Pending, Claim, Sending},
		{Sending, Succeed, Sent},
		{Sending, Retry, Pending},
		{Sending, Fail, Failed},
		{Pending, Expire, Skipped},
		{Sending, Doubt, InDoubt},
		{InDoubt, ResolveSent, Sent},
		{Sending, Callback, Sent},
		{InDoubt, Callback, Sent},
		{Pending, Callback, ""},
		{Failed, Callback, ""},
		{Failed, Requeue, Pending},
		{Pending, Cancel, Cancelled},
		// Settled rows never move again without an operator.
		{Sent, Succeed, ""},
		{Sent, Requeue, ""},
		{Sent, Claim, ""},
		{Cancelled, Requeue, ""},
		{Sending, Cancel, ""},
		{InDoubt, Claim, ""},
		{Pending, Succeed, ""},
		{InDoubt, ResolveSent, Sent},
	}
	for _, c := range cases {
		got, err := Next(c.from, c.ev)
		if c.want == "" {
			if err == nil {
				t.Errorf("Next(%s, %s) = %s, want refused", c.from, c.ev, got)
			}
			continue
		}
		if err != nil || got != c.want {
			t.Errorf("Next(%s, %s) = %s, %v; want %s", c.from, c.ev, got, err, c.want)
		}
	}
}

func TestEveryStateReachable(t *testing.T) {
	seen := map[State]bool{Pending: true}
	for _, e := range Table {
		seen[State(e.Dst)] = true
	}
	for _, s := range States {
		if !seen[s] {
			t.Errorf("state %s is not reachable", s)
		}
		if !s.Valid() {
			t.Errorf("state %s not valid", s)
		}
	}
	if State("sent").Valid() {
		t.Error("lower-case state accepted")
	}
}

func FuzzNext(f *testing.F) {
	for _, s := range States {
		for _, ev := range Events {
			f.Add(string(s), string(ev))
		}
	}
	f.Add("", "")
	f.Add("PENDING\x00", "claim")
	f.Fuzz(func(t *testing.T, s, ev string) {
		got, err := Next(State(s), Event(ev))
		want, ferr := Apply(context.Background(), State(s), Event(ev))
		if (err == nil) != (ferr == nil) {
			t.Fatalf("Next(%q, %q) err=%v, fsm err=%v", s, ev, err, ferr)
		}
		if err == nil {
			if got != want || !got.Valid() || !State(s).Valid() {
				t.Fatalf("Next(%q, %q) = %q, fsm %q", s, ev, got, want)
			}
		}
	})
}
