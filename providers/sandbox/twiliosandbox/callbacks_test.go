package twiliosandbox

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/effectd/effectd/providers/sandbox/internal/emu"
	"github.com/effectd/effectd/providers/sandbox/internal/emutest"
	"github.com/twilio/twilio-go/client"
)

// TestStatusCallbacks: each status is POSTed to the StatusCallback,
// signed with the auth token as twilio-go's validator expects; the magic
// undeliverable number ends undelivered with 30003.
func TestStatusCallbacks(t *testing.T) {
	t.Parallel()
	s := New(emu.NewLedger(), &emu.Faults{})
	s.SetQueueDelay(50 * time.Millisecond)
	s.SetDeliveryDelay(50 * time.Millisecond)
	ts := serve(t, s)
	rcv := emutest.NewReceiver(t, http.StatusNoContent)
	validator := client.NewRequestValidator("token") // callErr authenticates with "token"

	for _, c := range []struct {
		to    string
		final string
		code  string
	}{{"+15551234567", "delivered", ""}, {UndeliveredNumber, "undelivered", "30003"}} {
		cb := rcv.URL + "/cb?effectd_intent_id=7"
		form := sendForm(c.to, "hi")
		form.Set("StatusCallback", cb)
		code, msg, _ := call(t, ts, http.MethodPost, messagesPath, form)
		if code != http.StatusCreated {
			t.Fatalf("create: %d %v", code, msg)
		}
		sid := msg["sid"].(string)
		var statuses []string
		rcv.Until(t, func() bool { return len(allFor(rcv, sid)) >= 3 })
		for _, r := range allFor(rcv, sid) {
			vals, _ := url.ParseQuery(string(r.Body))
			params := map[string]string{}
			for k := range vals {
				params[k] = vals.Get(k)
			}
			if !validator.Validate(cb, params, r.Header.Get("X-Twilio-Signature")) {
				t.Errorf("%s %s: signature does not validate", sid, vals.Get("MessageStatus"))
			}
			if other := client.NewRequestValidator("other"); other.Validate(cb, params, r.Header.Get("X-Twilio-Signature")) {
				t.Errorf("signature validates with another token")
			}
			statuses = append(statuses, vals.Get("MessageStatus")+vals.Get("ErrorCode"))
		}
		if want := fmt.Sprint([]string{"queued", "sent", c.final + c.code}); fmt.Sprint(statuses) != want {
			t.Errorf("%s: callbacks %v, want %s", c.to, statuses, want)
		}
		_, m, _ := call(t, ts, http.MethodGet, "/2010-04-01/Accounts/ACtest/Messages/"+sid+".json", nil)
		if m["status"] != c.final || fmt.Sprint(m["error_code"]) != map[string]string{"": "<nil>", "30003": "30003"}[c.code] {
			t.Errorf("%s: fetched %v %v, want %s %s", c.to, m["status"], m["error_code"], c.final, c.code)
		}
	}
	// The ledger records a callback once its answer is in, which can be just
	// after the receiver has seen it: poll, with a deadline.
	callbacks := func() int { return len(s.Ledger.Snapshot("twilio").Callbacks) }
	for deadline := time.Now().Add(10 * time.Second); callbacks() < 6 && time.Now().Before(deadline); {
		time.Sleep(5 * time.Millisecond)
	}
	if n := callbacks(); n != 6 {
		t.Errorf("ledger callbacks = %d, want 6", n)
	}
}

func allFor(r *emutest.Receiver, sid string) []emutest.Request {
	var out []emutest.Request
	for _, x := range r.All() {
		if strings.Contains(string(x.Body), "MessageSid="+sid) {
			out = append(out, x)
		}
	}
	return out
}
