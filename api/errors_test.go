package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/operator"
	"github.com/effectd/effectd/statemachine"
)

// TestErrorMessagesSpeakToUsers: an error answer's message says what went
// wrong in the API's words: no Go operation (operator.Operate(…)) and no
// repeat of what its code already says (forbidden: forbidden: …).
func TestErrorMessagesSpeakToUsers(t *testing.T) {
	t.Parallel()
	e := setup(t)
	sent := e.insertIntent(t, "hook", "done", statemachine.Sent)
	pending := e.insertIntent(t, "hook", "waiting", statemachine.Pending)
	tests := []struct {
		method, path, token, body string
		status                    int
		code, message             string // the message starts with message
	}{
		{"POST", fmt.Sprintf("/v1/intents/%d/resolve", sent), adminToken, `{"as":"skip","reason":"r"}`, 409, "conflict",
			`the intent is SENT, and resolve_skip applies only to IN_DOUBT or SENDING`},
		{"POST", fmt.Sprintf("/v1/intents/%d/cancel", pending), readToken, "", 403, "forbidden", "role viewer may not operate"},
		{"GET", "/v1/intents?status=DONE", adminToken, "", 422, "invalid", "status: "},
		{"POST", fmt.Sprintf("/v1/intents/%d/retry", pending), adminToken, "[]", 400, "malformed", "the body must be a JSON object"},
		{"POST", fmt.Sprintf("/v1/intents/%d/retry", sent+1000), adminToken, "", 404, "not_found", fmt.Sprintf("intent %d: not found", sent+1000)},
		{"GET", "/v1/intents", "", "", 401, "unauthorized", "missing or unknown bearer token"},
	}
	for _, tc := range tests {
		status, body := e.do(t, tc.method, tc.path, tc.token, tc.body)
		var got errorBody
		json.Unmarshal([]byte(body), &got)
		if status != tc.status || got.Error.Code != tc.code || !strings.HasPrefix(got.Error.Message, tc.message) {
			t.Errorf("%s %s: %d %s: %s\nwant %d %s: %s…", tc.method, tc.path, status, got.Error.Code, got.Error.Message,
				tc.status, tc.code, tc.message)
		}
	}
}

// TestMessageDropsOperations: a dispatcher operation's name leaves the message
// wherever it stands in the chain, and the sentinel's words only where they lead
// the layer that wraps it.
func TestMessageDropsOperations(t *testing.T) {
	snapshotUsed := fmt.Errorf("%w: bulk snapshot", statemachine.ErrTransition) // as the operator service's ApplyBulk wraps it
	lease := &dispatcher.LeaseError{IntentID: 5, Until: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}
	tests := []struct {
		err      error
		sentinel error
		want     string
	}{
		{fmt.Errorf("reconcile intent 5: %w", &dispatcher.OpError{Op: "dispatcher.Reconcile(5)", Err: lease}), statemachine.ErrTransition,
			"reconcile intent 5: intent 5 is SENDING under a lease held until 2030-01-02T03:04:05Z; resolve it after the lease expires"},
		{&operator.OpError{Op: "operator.Operate(5, cancel)", Err: fmt.Errorf("intent 5: %w", operator.ErrNotFound)}, operator.ErrNotFound,
			"intent 5: not found"},
		{fmt.Errorf("%w %s was already applied", snapshotUsed, "s-1"), statemachine.ErrTransition, "bulk snapshot s-1 was already applied"},
		{fmt.Errorf("%w: not found here: %w", errMalformed, errors.New("x")), errMalformed, "malformed request: not found here: x"},
	}
	for _, tc := range tests {
		if got := message(tc.err, tc.sentinel); got != tc.want {
			t.Errorf("message(%q) = %q, want %q", tc.err, got, tc.want)
		}
	}
}
