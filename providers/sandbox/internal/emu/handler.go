package emu

import (
	"encoding/json"
	"net/http"
	"time"
)

// Host is what an emulated provider shares with the rest of the sandbox. Every
// route of a provider is a Route served by Host.Handle: Admit refuses what
// the provider refuses before any route (a bad credential, an unreadable
// form), the route answers with a Reply, and Handle records the call in the
// ledger before it answers. A route draws its faults with Draw at the point
// where the provider applies them.
type Host struct {
	Kind      string // the provider's name in the ledger and in the faults: "stripe", "twilio"
	KeyHeader string // the request header recorded as a call's key; "" for none
	Ledger    *Ledger
	Faults    *Faults
	Now       func() time.Time // the provider's clock; replaced by tests

	// Admit answers a request the provider refuses before any route sees
	// it; ok lets the request through.
	Admit func(w http.ResponseWriter, r *http.Request) (rep Reply, ok bool)
}

// Route answers one request of an emulated provider.
type Route func(r *http.Request) Reply

// Reply is a route's answer, and what the ledger records of it.
type Reply struct {
	Status  int         // the answer's status
	Header  http.Header // set on the answer besides Content-Type: application/json
	Body    []byte
	Ref     string   // the object the call created, replayed or read
	Applied bool     // the call created an effect
	Fault   Decision // the injected fault, named in the ledger; Fault.Drop drops the connection instead of answering
	Then    func()   // runs once the answer is written or the connection dropped

	unanswered bool // the client went away during an injected latency or hang
}

// NoAnswer is the reply to a request whose client went away during the
// injected latency or hang of d: recorded, never answered.
func NoAnswer(d Decision) Reply { return Reply{Fault: d, unanswered: true} }

// JSON is a reply of status with v encoded as its body, followed by a newline.
func JSON(status int, v any) Reply {
	b, _ := json.Marshal(v)
	return Reply{Status: status, Body: append(b, '\n')}
}

// Handle serves route: Admit first, then route, then the answer, recorded in
// the ledger before it is written.
func (h *Host) Handle(route Route) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		rep, ok := h.Admit(w, r)
		if ok {
			rep = route(r)
		}
		h.answer(w, r, rep)
	}
}

// Draw draws the fault of the provider's kind for r and waits out its latency
// and hang; ok is false when the request must get no answer (NoAnswer).
func (h *Host) Draw(r *http.Request) (d Decision, ok bool) {
	d = h.Faults.Decide(h.Kind)
	return d, d.Before(r.Context())
}

// answer records the call of rep in the ledger, then answers it: not at all,
// by dropping the connection, or by writing it.
func (h *Host) answer(w http.ResponseWriter, r *http.Request, rep Reply) {
	call := Call{
		At: h.Now(), Kind: h.Kind, Method: r.Method, Path: r.URL.Path,
		Status: rep.Status, Applied: rep.Applied, Ref: rep.Ref, Fault: rep.Fault.Name(),
	}
	if h.KeyHeader != "" {
		call.Key = r.Header.Get(h.KeyHeader)
	}
	h.Ledger.RecordCall(call)
	switch {
	case rep.unanswered:
		return
	case rep.Fault.Drop:
		if rep.Then != nil {
			rep.Then()
		}
		DropResponse(w)
		return
	}
	rep.Write(w)
	if rep.Then != nil {
		rep.Then()
	}
}

// Write writes rep's headers, status and body to w.
func (rep Reply) Write(w http.ResponseWriter) {
	for k, v := range rep.Header {
		w.Header()[k] = v
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rep.Status)
	w.Write(rep.Body)
}
