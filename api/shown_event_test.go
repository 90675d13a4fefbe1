package api

import (
	"fmt"
	"net/http"
	"testing"

	"github.com/effectd/effectd/statemachine"
)

// TestOperateOnTheEventShown: an operation that carries the event id the
// operator was shown (?event_id=) acts only while the intent's id still
// names that event: for another event's intent it answers 404 and changes
// nothing, as after a failover that handed a lost intent's id to a new one.
func TestOperateOnTheEventShown(t *testing.T) {
	t.Parallel()
	e := setup(t)
	failed := e.insertIntent(t, "sms", "shown-failed", statemachine.Failed)
	pending := e.insertIntent(t, "sms", "shown-pending", statemachine.Pending)
	doubt := e.insertIntent(t, "sms", "shown-doubt", statemachine.InDoubt)
	for _, tt := range []struct {
		path, body string
	}{
		{fmt.Sprintf("/v1/intents/%d/retry?event_id=another", failed), ""},
		{fmt.Sprintf("/v1/intents/%d/cancel?event_id=another", pending), `{"reason":"customer asked"}`},
		{fmt.Sprintf("/v1/intents/%d/resolve?event_id=another", doubt), `{"as":"skip","reason":"seen"}`},
	} {
		status, body := e.do(t, "POST", tt.path, adminToken, tt.body)
		want(t, status, body, http.StatusNotFound, "another")
	}
	for id, st := range map[int64]string{failed: "FAILED", pending: "PENDING", doubt: "IN_DOUBT"} {
		status, body := e.do(t, "GET", fmt.Sprintf("/v1/intents/%d", id), readToken, "")
		want(t, status, body, http.StatusOK, `"status": "`+st+`"`)
	}
	status, body := e.do(t, "POST", fmt.Sprintf("/v1/intents/%d/retry?event_id=shown-failed", failed), adminToken, "")
	want(t, status, body, http.StatusOK, `"PENDING"`)
	status, body = e.do(t, "POST", fmt.Sprintf("/v1/intents/%d/cancel?event_id=%%00", pending), adminToken, "")
	want(t, status, body, http.StatusBadRequest, "event_id")
}
