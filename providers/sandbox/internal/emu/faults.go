package emu

import (
	"context"
	"math/rand/v2"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Fault is what the sandbox does to requests of one kind ("webhook", "stripe",
// "twilio", or "*" for all). Rates are probabilities in [0, 1], drawn per request.
type Fault struct {
	Latency     time.Duration `json:"latency,omitempty"`      // added before answering
	ErrorRate   float64       `json:"error_rate,omitempty"`   // answer ErrorStatus without applying
	ErrorStatus int           `json:"error_status,omitempty"` // default 500
	RetryAfter  int           `json:"retry_after,omitempty"`  // seconds, sent with 429/503 errors
	HangRate    float64       `json:"hang_rate,omitempty"`    // never answer (until the client gives up) and do not apply
	DropRate    float64       `json:"drop_rate,omitempty"`    // apply, then drop the connection without an answer
	Times       int           `json:"times,omitempty"`        // clear the fault after this many requests met it (0: never)
}

// Faults holds the fault of each kind. It is safe for concurrent use.
type Faults struct {
	mu sync.RWMutex
	by map[string]Fault
}

// Set replaces the fault for kind; a zero Fault clears it.
func (f *Faults) Set(kind string, x Fault) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.by == nil {
		f.by = map[string]Fault{}
	}
	if x == (Fault{}) {
		delete(f.by, kind)
		return
	}
	f.by[kind] = x
}

// All returns a copy of every fault set.
func (f *Faults) All() map[string]Fault {
	f.mu.RLock()
	defer f.mu.RUnlock()
	out := make(map[string]Fault, len(f.by))
	for k, v := range f.by {
		out[k] = v
	}
	return out
}

// For returns the fault for kind, falling back to "*".
func (f *Faults) For(kind string) Fault {
	f.mu.RLock()
	defer f.mu.RUnlock()
	if x, ok := f.by[kind]; ok {
		return x
	}
	return f.by["*"]
}

// strike returns the fault for kind and counts one use of it, clearing it when
// its Times are used up. The fault is taken under the lock, so that concurrent
// requests never use it more than Times times.
func (f *Faults) strike(kind string) Fault {
	f.mu.Lock()
	defer f.mu.Unlock()
	key := kind
	x, ok := f.by[kind]
	if !ok {
		key, x = "*", f.by["*"]
	}
	if x.Times <= 0 {
		return x // cleared, or never limited, since For looked
	}
	if x.Times == 1 {
		delete(f.by, key)
	} else {
		y := x
		y.Times--
		f.by[key] = y
	}
	return x
}

// Decision is what to do with one request, drawn from a Fault.
type Decision struct {
	Latency    time.Duration
	Error      int // status to answer without applying; 0 = none
	RetryAfter int
	Hang       bool
	Drop       bool // apply, then drop the response
}

// Name describes the decision for the ledger ("" when nothing is injected).
func (d Decision) Name() string {
	switch {
	case d.Hang:
		return "hang"
	case d.Error != 0:
		return "error " + strconv.Itoa(d.Error)
	case d.Drop:
		return "drop"
	case d.Latency > 0:
		return "latency"
	}
	return ""
}

// Decide draws what happens to one request of kind.
func (f *Faults) Decide(kind string) Decision {
	x := f.For(kind)
	if x.Times > 0 {
		x = f.strike(kind)
	}
	d := Decision{Latency: x.Latency, RetryAfter: x.RetryAfter}
	switch r := rand.Float64(); {
	case r < x.HangRate:
		d.Hang = true
	case r < x.HangRate+x.ErrorRate:
		d.Error = x.ErrorStatus
		if d.Error == 0 {
			d.Error = http.StatusInternalServerError
		}
	case r < x.HangRate+x.ErrorRate+x.DropRate:
		d.Drop = true
	}
	return d
}

// Before applies the decision's latency and hang. It returns false when the
// request must get no answer at all (a hang ended by the client or the server).
// Read the request body first: net/http cancels the request's context when the
// client goes away only once the body has been consumed, so a hang before that
// outlives the client and blocks the server's shutdown.
func (d Decision) Before(ctx context.Context) bool {
	if d.Latency > 0 {
		select {
		case <-time.After(d.Latency):
		case <-ctx.Done():
			return false
		}
	}
	if d.Hang {
		<-ctx.Done()
		return false
	}
	return true
}

// ErrorReply is the answer of an injected error: the decision's status, with
// Retry-After if set, and body.
func (d Decision) ErrorReply(body []byte) Reply {
	rep := Reply{Status: d.Error, Header: http.Header{}, Body: body, Fault: d}
	if d.RetryAfter > 0 {
		rep.Header.Set("Retry-After", strconv.Itoa(d.RetryAfter))
	}
	return rep
}

// DropResponse closes the client's connection without writing an answer:
// the effect was applied but the client never learns it.
func DropResponse(w http.ResponseWriter) {
	if hj, ok := w.(http.Hijacker); ok {
		if conn, _, err := hj.Hijack(); err == nil {
			conn.Close()
			return
		}
	}
	panic(http.ErrAbortHandler) // net/http closes the connection without a response
}
