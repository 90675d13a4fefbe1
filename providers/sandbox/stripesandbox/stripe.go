package stripesandbox

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/effectd/effectd/providers/sandbox/internal/emu"
)

// Emulator emulates the parts of Stripe's API that effectd uses: creating,
// retrieving, listing and searching refunds, payment intents and transfers.
//
// Idempotency follows Stripe's documented semantics. A POST with an
// Idempotency-Key saves its first response (status and body) for the key, per
// API key, for the key window; a later request with the same key and the same
// parameters gets that response replayed with Idempotent-Replayed: true, one
// with other parameters gets 400 idempotency_error, and one that arrives while
// the first is still running gets 409 idempotency_key_in_use. Requests refused
// before they execute (authentication, validation, 409) save nothing.
//
// Faults (kind "stripe") apply to every request after the key check: latency
// delays, a hang never answers and leaves nothing saved, drop creates the object
// and saves the response but closes the connection, and an injected error
// answers its status without creating anything. An injected 500 is saved as the
// key's first response, as Stripe saves a 500 from an endpoint that began
// executing, so it replays until the key expires; other injected statuses (429,
// 502, 503, ...) stand for refusals in front of the API and save nothing. A
// read that meets a drop is dropped before it reads.
type Emulator struct {
	emu.Host
	keyWindow time.Duration

	mu       sync.Mutex
	keys     map[string]*key // api key + "\x00" + idempotency key
	keyFIFO  []*key          // in creation order, for pruning
	objects  []*object       // in creation order
	byID     map[string]*object
	endpoint *endpoint // where events go; nil: nowhere

	refundFailDelay time.Duration // a refund of pi_refund_fails turns failed this long after creation
}

// key is one idempotency key's saved state.
type key struct {
	scope       string
	fingerprint string // method, path and canonical form of the parameters
	at          time.Time
	done        bool // false while the first request runs
	status      int
	body        []byte
}

// object is one created refund, payment intent or transfer.
type object struct {
	id      string
	kind    string // refund | payment_intent | transfer
	created int64
	fields  map[string]string // filterable fields: payment_intent, charge, customer, transfer_group
	meta    map[string]string
	body    json.RawMessage
}

// KeyWindow is how long Stripe keeps idempotency keys, and the emulator by default.
const KeyWindow = 24 * time.Hour

// New returns an emulator with no objects that records its calls in ledger,
// draws faults of kind "stripe" from faults and keeps idempotency keys for
// keyWindow (0: KeyWindow).
func New(ledger *emu.Ledger, faults *emu.Faults, keyWindow time.Duration) *Emulator {
	return &Emulator{
		Host:      emu.Host{Kind: "stripe", KeyHeader: "Idempotency-Key", Ledger: ledger, Faults: faults, Now: time.Now, Admit: admit},
		keyWindow: cmp.Or(keyWindow, KeyWindow), keys: map[string]*key{}, byID: map[string]*object{}, refundFailDelay: RefundFailDelay,
	}
}

// Routes registers Stripe's routes and the sandbox's event endpoint on mux.
func (e *Emulator) Routes(mux *http.ServeMux) {
	for _, kind := range []string{"refund", "payment_intent", "transfer"} {
		coll := "/v1/" + kind + "s"
		mux.HandleFunc("POST "+coll, e.Handle(func(r *http.Request) emu.Reply { return e.create(r, kind) }))
		mux.HandleFunc("GET "+coll, e.Handle(e.faulted(func(r *http.Request) emu.Reply { return e.list(r, kind) })))
		mux.HandleFunc("GET "+coll+"/{id}", e.Handle(e.faulted(func(r *http.Request) emu.Reply { return e.retrieve(r, kind) })))
	}
	mux.HandleFunc("PUT /_sandbox/stripe/webhook", e.setWebhook)
	mux.HandleFunc("DELETE /_sandbox/stripe/webhook", e.deleteWebhook)
	mux.HandleFunc("GET /v1/payment_intents/search", e.Handle(e.faulted(func(r *http.Request) emu.Reply { return e.search(r, "payment_intent") })))
}

// apiError is Stripe's error body.
type apiError struct {
	Type    string `json:"type"`
	Code    string `json:"code,omitempty"`
	Param   string `json:"param,omitempty"`
	Message string `json:"message"`
}

func errorBody(se apiError) []byte {
	b, _ := json.Marshal(map[string]apiError{"error": se})
	return b
}

// injectedError is the body of an injected error status.
func injectedError(status int) []byte {
	return errorBody(apiError{Type: "api_error", Message: "sandbox: injected error " + strconv.Itoa(status)})
}

// reply is a JSON answer with a Request-Id, as Stripe gives every answer.
func reply(status int, body []byte) emu.Reply {
	return emu.Reply{Status: status, Header: http.Header{"Request-Id": {"req_" + randomID(12)}}, Body: body}
}

// admit refuses requests without a test-mode secret key, as Stripe does, and
// requests whose form does not parse.
func admit(w http.ResponseWriter, r *http.Request) (emu.Reply, bool) {
	key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	if !ok || !strings.HasPrefix(key, "sk_test_") {
		return reply(http.StatusUnauthorized, errorBody(apiError{
			Type:    "invalid_request_error",
			Message: "Invalid API Key provided: the sandbox accepts any secret key starting with sk_test_, sent as Authorization: Bearer sk_test_...",
		})), false
	}
	if err := r.ParseForm(); err != nil {
		return reply(http.StatusBadRequest, errorBody(apiError{Type: "invalid_request_error", Message: "Invalid request body: " + err.Error()})), false
	}
	return emu.Reply{}, true
}

// create handles POST /v1/{refunds,payment_intents,transfers}: validation,
// then the idempotency key, then faults, then the new object.
func (e *Emulator) create(r *http.Request, kind string) emu.Reply {
	if se, ok := validate(kind, r.PostForm); !ok {
		return reply(http.StatusBadRequest, errorBody(se))
	}
	idem := r.Header.Get("Idempotency-Key")
	var k *key
	if idem != "" {
		apiKey := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
		var answered *emu.Reply
		if k, answered = e.claimKey(apiKey+"\x00"+idem, r.Method+" "+r.URL.Path+"?"+r.PostForm.Encode()); answered != nil {
			return *answered
		}
	}

	d, ok := e.Draw(r)
	if !ok {
		e.release(k)
		return emu.NoAnswer(d)
	}
	if d.Error != 0 {
		body := injectedError(d.Error)
		if d.Error == http.StatusInternalServerError {
			e.save(k, d.Error, body)
		} else {
			e.release(k)
		}
		rep := d.ErrorReply(body)
		rep.Header.Set("Request-Id", "req_"+randomID(12))
		return rep
	}

	obj := e.newObject(kind, r.PostForm)
	ledgerKey := idem
	if ledgerKey == "" {
		ledgerKey = obj.id // no key: every request is its own effect
	}
	e.Ledger.Apply("stripe", ledgerKey, obj.id, obj.body)
	e.save(k, http.StatusOK, obj.body)
	rep := reply(http.StatusOK, obj.body)
	rep.Ref, rep.Applied, rep.Fault = obj.id, true, d
	// Events start after the answer is written: a later change rewrites obj.body.
	rep.Then = func() { e.created(obj, idem) }
	return rep
}

// randomID returns n random hex digits.
func randomID(n int) string {
	b := make([]byte, (n+1)/2)
	rand.Read(b)
	return hex.EncodeToString(b)[:n]
}
