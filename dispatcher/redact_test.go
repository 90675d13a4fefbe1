package dispatcher_test

import (
	"encoding/json"
	"testing"

	"github.com/effectd/effectd/dispatcher"
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
	msg := `The 'To' number +15005550006 is not valid; body "Your code is 123456" (12345)`
	want := `The 'To' number *** is not valid; body "***" (***)`
	if got := dispatcher.RedactText(msg, payload, []string{"to", "body", "n"}); got != want {
		t.Errorf("RedactText = %q, want %q", got, want)
	}
	if got := dispatcher.RedactText(msg, payload, nil); got != msg {
		t.Errorf("RedactText with no fields = %q", got)
	}
}
