package sandbox

import (
	"crypto/rand"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"sync"

	"github.com/effectd/effectd/providers/sandbox/internal/emu"
	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"
)

// maxHookBody is the largest webhook body the receiver accepts.
const maxHookBody = 1 << 20

// hookReceiver emulates a Standard Webhooks receiver that applies each
// webhook-id once. Ids are deduplicated across receiver names, as the ledger
// counts webhook effects by id alone (effectd's keys carry the channel anyway).
type hookReceiver struct {
	s *Server

	mu   sync.Mutex        // held across check-and-apply, so one id applies once
	refs map[string]string // webhook-id → ref of its effect
}

func newHookReceiver(s *Server) *hookReceiver {
	return &hookReceiver{s: s, refs: map[string]string{}}
}

func (h *hookReceiver) routes(mux *http.ServeMux) {
	mux.HandleFunc("POST /hooks/{name}", h.receive)
}

// secret returns the receiver's secret, "" when it accepts unsigned calls.
func (h *hookReceiver) secret(name string) string {
	if s, ok := h.s.opts.WebhookSecrets[name]; ok {
		return s
	}
	return h.s.opts.WebhookSecret
}

// receive answers one delivery: faults first (latency, hang), then the
// signature, then injected errors, then the effect, applied once per id. The
// body is read before any fault: only then does net/http notice a client that
// gives up, which ends a hang.
func (h *hookReceiver) receive(w http.ResponseWriter, r *http.Request) {
	id := r.Header.Get(standardwebhooks.HeaderWebhookID)
	call := Call{Kind: "webhook", Method: r.Method, Path: r.URL.Path, Key: id}
	record := func(status int) {
		call.Status = status
		h.s.Ledger.RecordCall(call)
	}

	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxHookBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			record(http.StatusRequestEntityTooLarge)
			writeJSON(w, http.StatusRequestEntityTooLarge, hookError("body exceeds 1 MiB"))
			return
		}
		record(0) // the client went away mid-body
		return
	}
	d := h.s.Faults.Decide("webhook")
	switch {
	case d.Hang:
		call.Fault = "hang"
	case d.Latency > 0:
		call.Fault = "latency"
	}
	if !d.Before(r.Context()) {
		record(0) // the client gave up: no answer, no effect
		return
	}

	if secret := h.secret(r.PathValue("name")); secret != "" {
		wh, err := standardwebhooks.NewWebhook(secret)
		if err != nil {
			record(http.StatusInternalServerError)
			writeJSON(w, http.StatusInternalServerError, hookError("sandbox: bad secret for receiver "+r.PathValue("name")))
			return
		}
		if err := wh.Verify(body, r.Header); err != nil {
			record(http.StatusUnauthorized)
			writeJSON(w, http.StatusUnauthorized, hookError(err.Error()))
			return
		}
	}
	if d.Error != 0 {
		call.Fault = d.Name()
		record(d.Error)
		d.ErrorReply([]byte(`{"error":"injected fault"}`)).Write(w)
		return
	}

	call.Ref, call.Applied = h.apply(id, body)
	if d.Drop {
		call.Fault = "drop"
		record(http.StatusOK)
		emu.DropResponse(w)
		return
	}
	record(http.StatusOK)
	writeJSON(w, http.StatusOK, map[string]string{"id": call.Ref})
}

// apply applies the effect of id once and returns its ref; applied is false
// when id was applied before. A call without id is a new effect every time,
// as with a receiver that does not deduplicate.
func (h *hookReceiver) apply(id string, body []byte) (ref string, applied bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if ref, ok := h.refs[id]; ok && id != "" {
		return ref, false
	}
	ref = "msg_" + rand.Text()
	key := id
	if id == "" {
		key = ref
	} else {
		h.refs[id] = ref
	}
	h.s.Ledger.Apply("webhook", key, ref, rawJSON(body))
	return ref, true
}

// rawJSON returns body for the ledger when it is JSON, else nil.
func rawJSON(body []byte) json.RawMessage {
	if json.Valid(body) {
		return body
	}
	return nil
}

func hookError(msg string) map[string]string { return map[string]string{"error": msg} }
