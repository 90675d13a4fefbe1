package emu

import (
	"encoding/json"
	"sync"
	"time"
)

// Call is one request the sandbox received.
type Call struct {
	Seq     int64     `json:"seq"`
	At      time.Time `json:"at"`
	Kind    string    `json:"kind"` // webhook | stripe | twilio
	Method  string    `json:"method"`
	Path    string    `json:"path"`
	Key     string    `json:"key,omitempty"` // idempotency key or webhook-id
	Status  int       `json:"status"`        // what was (or would have been) answered
	Applied bool      `json:"applied"`       // this call created an effect
	Ref     string    `json:"ref,omitempty"` // the object it created or replayed
	Fault   string    `json:"fault,omitempty"`
}

// Effect is one applied side effect: a refund, a message, a delivered webhook.
type Effect struct {
	Kind    string          `json:"kind"`
	Key     string          `json:"key"` // idempotency key, webhook-id, or for Twilio the message SID
	Ref     string          `json:"ref"`
	At      time.Time       `json:"at"`
	Applied int             `json:"applied"` // times applied: more than 1 is a duplicate
	Body    json.RawMessage `json:"body,omitempty"`
}

// Callback is one event the sandbox sent out: a Twilio status callback or a
// Stripe webhook event.
type Callback struct {
	At     time.Time `json:"at"`
	Kind   string    `json:"kind"` // twilio | stripe
	URL    string    `json:"url"`
	Ref    string    `json:"ref"`             // the object: SM…, re_…
	Event  string    `json:"event,omitempty"` // Stripe's evt_… and type
	Status string    `json:"status"`          // the object's status it reports
	Answer int       `json:"answer"`          // the receiver's HTTP status; 0: no answer
	Error  string    `json:"error,omitempty"` // why there was no answer
	Try    int       `json:"try"`             // 1 for the first delivery, more for retries
}

// Ledger records calls, effects and callbacks. It is safe for concurrent use.
type Ledger struct {
	mu        sync.Mutex
	seq       int64
	calls     []Call
	callbacks []Callback
	effects   []*Effect
	byKey     map[string]*Effect // kind + "\x00" + key
	counts    map[string]*[2]int // per kind: effects, applications
}

// NewLedger returns an empty ledger.
func NewLedger() *Ledger { return &Ledger{byKey: map[string]*Effect{}, counts: map[string]*[2]int{}} }

// RecordCall appends c, numbering it.
func (l *Ledger) RecordCall(c Call) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.seq++
	c.Seq = l.seq
	if c.At.IsZero() {
		c.At = time.Now()
	}
	l.calls = append(l.calls, c)
}

// RecordCallback appends c.
func (l *Ledger) RecordCallback(c Callback) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if c.At.IsZero() {
		c.At = time.Now()
	}
	l.callbacks = append(l.callbacks, c)
}

// Apply records that an effect of kind with key took place, and returns how many
// times it has been applied, counting this one.
func (l *Ledger) Apply(kind, key, ref string, body json.RawMessage) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := kind + "\x00" + key
	c := l.counts[kind]
	if c == nil {
		c = &[2]int{}
		l.counts[kind] = c
	}
	c[1]++
	if e, ok := l.byKey[k]; ok {
		e.Applied++
		return e.Applied
	}
	c[0]++
	e := &Effect{Kind: kind, Key: key, Ref: ref, At: time.Now(), Applied: 1, Body: body}
	l.byKey[k] = e
	l.effects = append(l.effects, e)
	return 1
}

// Applied returns how many times the effect kind/key was applied.
func (l *Ledger) Applied(kind, key string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	if e, ok := l.byKey[kind+"\x00"+key]; ok {
		return e.Applied
	}
	return 0
}

// Count returns how many distinct effects of kind were applied and how many
// applications they add up to (more than the effects: duplicates). It copies nothing.
func (l *Ledger) Count(kind string) (effects, applications int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, c := range l.counts {
		if kind == "" || k == kind {
			effects += c[0]
			applications += c[1]
		}
	}
	return effects, applications
}

// Snapshot is the ledger's content at one moment, as served over HTTP.
type Snapshot struct {
	Calls     []Call     `json:"calls"`
	Effects   []Effect   `json:"effects"`
	Callbacks []Callback `json:"callbacks"`
}

// Snapshot copies the ledger. kind filters when not empty.
func (l *Ledger) Snapshot(kind string) Snapshot {
	l.mu.Lock()
	defer l.mu.Unlock()
	s := Snapshot{Calls: []Call{}, Effects: []Effect{}, Callbacks: []Callback{}}
	for _, c := range l.callbacks {
		if kind == "" || c.Kind == kind {
			s.Callbacks = append(s.Callbacks, c)
		}
	}
	for _, c := range l.calls {
		if kind == "" || c.Kind == kind {
			s.Calls = append(s.Calls, c)
		}
	}
	for _, e := range l.effects {
		if kind == "" || e.Kind == kind {
			s.Effects = append(s.Effects, *e)
		}
	}
	return s
}

// Reset forgets every call and effect.
func (l *Ledger) Reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls, l.effects, l.callbacks, l.byKey, l.counts = nil, nil, nil, map[string]*Effect{}, map[string]*[2]int{}
}
