package dispatcher_test

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/policy"
)

// textErr is a permanent provider error with the text a test picks.
type textErr string

func (e textErr) Error() string   { return string(e) }
func (e textErr) Retryable() bool { return false }
func (e textErr) MaybeSent() bool { return false }

// TestLongErrorTextIsStored: a provider error longer than the stored limit
// whose cut falls inside a multi-byte character, errors and references holding
// invalid UTF-8 or a NUL byte, each in a completion batch beside a sent intent.
// The text stored is valid UTF-8 that PostgreSQL accepts, so every outcome of
// the batch is written at once instead of being retried and left to the
// reconciler.
func TestLongErrorTextIsStored(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 999) + "é" + strings.Repeat("y", 50) // "é" is 2 bytes: bytes 1000 and 1001
	p := &scripted{calls: map[string]int{}, answer: func(key string, n int) (string, error) {
		switch key {
		case "c:long":
			return "", textErr(long)
		case "c:invalid":
			return "", textErr("receiver said \xff\xfe")
		case "c:nul":
			return "", textErr("receiver said a\x00b")
		case "c:ref-invalid": // a webhook receiver's X-Effect-Ref header may hold any byte
			return "ref-\xff", nil
		case "c:ref-nul": // so may a JSON id: {"id":"ref-\u0000"}
			return "ref-\x00", nil
		}
		return "ref-" + key, nil
	}}
	r := start(t, "webhook", p, fastPolicy("webhook"))
	r.enqueue(t, "ok", "long", "invalid", "nul", "ref-invalid", "ref-nul")

	got := r.waitStatus(t, "long", "FAILED")
	if !utf8.ValidString(got.LastError) || len(got.LastError) > 1000 || !strings.HasPrefix(got.LastError, strings.Repeat("x", 990)) {
		t.Errorf("long: last_error %q (%d bytes); want valid UTF-8 of at most 1000 bytes from the start of the text", got.LastError, len(got.LastError))
	}
	if got := r.waitStatus(t, "invalid", "FAILED"); got.LastError != "receiver said \uFFFD" {
		t.Errorf("invalid: last_error %q", got.LastError)
	}
	if got := r.waitStatus(t, "nul", "FAILED"); got.LastError != "receiver said a\uFFFDb" {
		t.Errorf("nul: last_error %q", got.LastError)
	}
	if got := r.waitStatus(t, "ref-invalid", "SENT"); got.Ref != "ref-\uFFFD" {
		t.Errorf("ref-invalid: provider_ref %q", got.Ref)
	}
	if got := r.waitStatus(t, "ref-nul", "SENT"); got.Ref != "ref-\uFFFD" {
		t.Errorf("ref-nul: provider_ref %q", got.Ref)
	}
	r.waitStatus(t, "ok", "SENT")
}

// oddPoller sends at once and answers every poll "undelivered" with a detail
// holding a byte that is not UTF-8.
type oddPoller struct{}

func (oddPoller) Send(context.Context, string, json.RawMessage, map[string]string) (string, error) {
	return "SM1", nil
}

func (oddPoller) Poll(context.Context, string) (status, delivery, detail string, reversal bool, err error) {
	return "undelivered", "undelivered", "undelivered \xff", false, nil
}

// TestPollDetailIsStored: a poll's detail that is not valid UTF-8 is stored
// as valid text, and the delivery moves.
func TestPollDetailIsStored(t *testing.T) {
	t.Parallel()
	pol := fastPolicy("twilio")
	pol.DeliveryPoll = policy.PollDelays{policy.Duration(time.Millisecond)}
	pool := pgtest.New(t)
	d := run(t, pool, dispatcher.Config{Channels: []dispatcher.Channel{{Name: "c", Kind: "twilio", Provider: oddPoller{}, Policy: pol}}, DeliveryPollInterval: time.Hour})
	r := rig{pool: pool, d: d}
	r.enqueue(t, "e")
	r.waitStatus(t, "e", "SENT")
	ctx := context.Background()
	eventually(t, 10*time.Second, "one poll", func() bool {
		n, err := dispatcher.PollDeliveries(ctx, d)
		if err != nil {
			t.Fatal(err)
		}
		return n == 1
	})
	var delivery, detail string
	if err := pool.QueryRow(ctx, `SELECT coalesce(delivery, ''), coalesce(delivery_detail, '') FROM effectd.intents WHERE event_id = 'e'`).Scan(&delivery, &detail); err != nil {
		t.Fatal(err)
	}
	if delivery != "undelivered" || detail != "undelivered \uFFFD" {
		t.Errorf("delivery %q, detail %q; want undelivered, %q", delivery, detail, "undelivered \uFFFD")
	}
}
