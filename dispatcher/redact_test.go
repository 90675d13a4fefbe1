package dispatcher_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/pgtest"
)

func TestRedact(t *testing.T) {
	t.Parallel()
	payload := json.RawMessage(`{"to": "+15005550006", "body": "Your code is 123456", "from": "+15005550001", "n": 12345}`)
	got := dispatcher.RedactPayload(payload, []string{"to", "body", "n", "missing"})
	var m map[string]any
	if err := json.Unmarshal(got, &m); err != nil {
		t.Fatal(err)
	}
	if m["to"] != "***" || m["body"] != "***" || m["n"] != "***" || m["from"] != "+15005550001" || len(m) != 4 {
		t.Errorf("RedactPayload = %s", got)
	}
	if got := dispatcher.RedactPayload(payload, nil); string(got) != string(payload) {
		t.Errorf("RedactPayload with no fields changed the payload: %s", got)
	}
	if got := dispatcher.RedactPayload(json.RawMessage(`[1`), []string{"to"}); string(got) != `"***"` {
		t.Errorf("RedactPayload of a broken payload = %s, want the whole of it masked", got)
	}
	if got := dispatcher.RedactPayload(json.RawMessage(`["+15005550006", 5, true]`), []string{"to"}); string(got) != `["***","***",true]` {
		t.Errorf("RedactPayload of an array = %s, want its values masked, still an array", got)
	}
	msg := `The 'To' number +15005550006 is not valid; body "Your code is 123456" (12345)`
	want := `The 'To' number *** is not valid; body "***" (***)`
	if got := dispatcher.RedactText(msg, payload, []string{"to", "body", "n"}); got != want {
		t.Errorf("RedactText = %q, want %q", got, want)
	}
	if got := dispatcher.RedactText(msg, payload, nil); got != msg {
		t.Errorf("RedactText with no fields = %q", got)
	}
}

// TestMaskValues: every string and number is masked, the document's shape
// (keys, array lengths, booleans, nulls) kept.
func TestMaskValues(t *testing.T) {
	t.Parallel()
	for in, want := range map[string]string{
		`{"To":"+15558675309","n":1e400,"ok":true,"x":null,"a":[{"b":"c"},[2]],"o":{}}`: `{"To":"***","a":[{"b":"***"},["***"]],"n":"***","o":{},"ok":true,"x":null}`,
		`"text"`: `"***"`,
		`[]`:     `[]`,
		`{"a"`:   `"***"`, // not JSON: masked whole
	} {
		if got := dispatcher.MaskValues(json.RawMessage(in)); string(got) != want {
			t.Errorf("MaskValues(%s) = %s, want %s", in, got, want)
		}
	}
}

// quotingErr is a permanent error whose text carries the payload's values.
type quotingErr struct{ msg string }

func (e quotingErr) Error() string { return e.msg }
func (quotingErr) Retryable() bool { return false }
func (quotingErr) MaybeSent() bool { return false }

type quotingProvider struct{}

func (quotingProvider) Send(_ context.Context, _ string, payload json.RawMessage, _ map[string]string) (string, error) {
	var p struct{ To, Body string }
	json.Unmarshal(payload, &p)
	return "", quotingErr{fmt.Sprintf("The 'To' number %s is not reachable; message %q not sent", p.To, p.Body)}
}

// TestFailureLogMasksRedactedFields: the log line of a failed call masks the
// channel's redacted payload values; the stored last_error keeps them for admins.
func TestFailureLogMasksRedactedFields(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	var mu sync.Mutex
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&lockedBuffer{mu: &mu, b: &logs}, nil))
	chans := []dispatcher.Channel{{Name: "c", Kind: "twilio", Provider: quotingProvider{}, Policy: fastPolicy("twilio"), Redact: []string{"to", "body"}}}
	r := rig{pool: pool, d: run(t, pool, dispatcher.Config{Channels: chans, Logger: log})}
	if ok, err := enqueue(t, pool, dispatcher.Intent{EventID: "otp", Channel: "c", Payload: `{"to":"+15558675309","body":"code 424242"}`}); err != nil || !ok {
		t.Fatalf("enqueue: %v %v", ok, err)
	}
	got := r.waitStatus(t, "otp", "FAILED")
	if !strings.Contains(got.LastError, "+15558675309") {
		t.Errorf("last_error %q: want the provider's text as it came", got.LastError)
	}
	// the line is written once the outcome is: after the status this test
	// waited for, not before
	line := ""
	eventually(t, 5*time.Second, "the failure's log line", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for l := range strings.SplitSeq(logs.String(), "\n") {
			if strings.Contains(l, "provider call failed") {
				line = l
			}
		}
		return line != ""
	})
	if strings.Contains(line, "5558675309") || strings.Contains(line, "424242") || !strings.Contains(line, "***") {
		t.Errorf("failure log line %q: want the number and text masked", line)
	}
}

type lockedBuffer struct {
	mu *sync.Mutex
	b  *bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}
