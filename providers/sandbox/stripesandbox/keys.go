package stripesandbox

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/effectd/effectd/providers/sandbox/internal/emu"
)

// claimKey looks the idempotency key up. It returns the key, now marked as
// running, when this request is the first; otherwise the answer to give: the
// saved one replayed, a 400 for other parameters, a 409 while the first runs.
func (e *Emulator) claimKey(scope, fingerprint string) (*key, *emu.Reply) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.Now()
	e.pruneLocked(now)
	if old, ok := e.keys[scope]; ok {
		idem := scope[strings.IndexByte(scope, 0)+1:]
		var rep emu.Reply
		switch {
		case old.fingerprint != fingerprint:
			rep = reply(http.StatusBadRequest, errorBody(apiError{
				Type: "idempotency_error",
				Message: fmt.Sprintf("Keys for idempotent requests can only be used with the same parameters they were first used with. "+
					"Try using a key other than '%s' if you meant to execute a different request.", idem),
			}))
		case !old.done:
			rep = reply(http.StatusConflict, errorBody(apiError{
				Type: "invalid_request_error", Code: "idempotency_key_in_use",
				Message: "There is currently another in-progress request using this Stripe-Idempotency-Key " +
					"(that probably means you submitted twice, and that's fine), please try again later.",
			}))
		default:
			rep = reply(old.status, old.body)
			rep.Header.Set("Idempotent-Replayed", "true")
			rep.Ref = replayedRef(old.body)
		}
		return nil, &rep
	}
	k := &key{scope: scope, fingerprint: fingerprint, at: now}
	e.keys[scope] = k
	e.keyFIFO = append(e.keyFIFO, k)
	return k, nil
}

// pruneLocked forgets keys older than the key window.
func (e *Emulator) pruneLocked(now time.Time) {
	cut := now.Add(-e.keyWindow)
	n := 0
	for n < len(e.keyFIFO) && !e.keyFIFO[n].at.After(cut) {
		if k := e.keyFIFO[n]; e.keys[k.scope] == k {
			delete(e.keys, k.scope)
		}
		n++
	}
	if n > 0 {
		e.keyFIFO = slices.Delete(e.keyFIFO, 0, n)
	}
}

// save stores the first response for k (nil: no key).
func (e *Emulator) save(k *key, status int, body []byte) {
	if k == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	k.done, k.status, k.body = true, status, body
}

// release forgets k: its request never executed, so the key is free again.
func (e *Emulator) release(k *key) {
	if k == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.keys[k.scope] == k {
		delete(e.keys, k.scope)
	}
}

// replayedRef returns the id of a replayed object, if the body is one.
func replayedRef(body []byte) string {
	var v struct {
		ID string `json:"id"`
	}
	json.Unmarshal(body, &v)
	return v.ID
}
