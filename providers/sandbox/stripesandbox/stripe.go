package stripesandbox

import (
	"cmp"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"slices"
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

var idPrefix = map[string]string{"refund": "re_", "payment_intent": "pi_", "transfer": "tr_"}

// newObject creates and stores an object of kind from validated form values.
func (e *Emulator) newObject(kind string, form map[string][]string) *object {
	get := func(k string) string {
		if v := form[k]; len(v) > 0 {
			return v[0]
		}
		return ""
	}
	meta := map[string]string{}
	for k, v := range form {
		if name, ok := strings.CutPrefix(k, "metadata["); ok && strings.HasSuffix(name, "]") && len(v) > 0 {
			meta[strings.TrimSuffix(name, "]")] = v[0]
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	o := &object{id: idPrefix[kind] + randomID(24), kind: kind, created: e.Now().Unix(), meta: meta, fields: map[string]string{}}
	amount, _ := strconv.ParseInt(get("amount"), 10, 64)
	m := map[string]any{"id": o.id, "object": kind, "created": o.created, "livemode": false, "metadata": meta}
	nullable := func(k string) any {
		if v := get(k); v != "" {
			return v
		}
		return nil
	}
	switch kind {
	case "refund":
		if amount == 0 {
			amount = 1000 // the emulator knows no charge amounts: a full refund of a made-up 10.00
		}
		o.fields["payment_intent"], o.fields["charge"] = get("payment_intent"), get("charge")
		if o.fields["charge"] == "" {
			o.fields["charge"] = "ch_" + randomID(24)
		}
		m["amount"], m["currency"], m["status"] = amount, "usd", "succeeded"
		m["payment_intent"], m["charge"], m["reason"] = nullable("payment_intent"), o.fields["charge"], nullable("reason")
	case "payment_intent":
		o.fields["customer"] = get("customer")
		status := "requires_payment_method"
		if get("payment_method") != "" {
			status = "requires_confirmation"
			if get("confirm") == "true" {
				status = "succeeded"
			}
		}
		m["amount"], m["amount_received"], m["currency"], m["status"] = amount, 0, strings.ToLower(get("currency")), status
		if status == "succeeded" {
			m["amount_received"] = amount
		}
		m["customer"], m["payment_method"] = nullable("customer"), nullable("payment_method")
		m["client_secret"] = o.id + "_secret_" + randomID(16)
		m["capture_method"], m["confirmation_method"] = "automatic", "automatic"
	case "transfer":
		o.fields["transfer_group"] = get("transfer_group")
		m["amount"], m["amount_reversed"], m["currency"] = amount, 0, strings.ToLower(get("currency"))
		m["destination"], m["transfer_group"], m["reversed"] = get("destination"), nullable("transfer_group"), false
	}
	o.body, _ = json.Marshal(m)
	e.objects = append(e.objects, o)
	e.byID[o.id] = o
	return o
}

// validate checks the parameters of a create request as Stripe does.
func validate(kind string, form map[string][]string) (apiError, bool) {
	has := func(k string) bool { return len(form[k]) > 0 && form[k][0] != "" }
	missing := func(p string) (apiError, bool) {
		return apiError{Type: "invalid_request_error", Code: "parameter_missing", Param: p, Message: "Missing required param: " + p + "."}, false
	}
	if has("amount") {
		if n, err := strconv.ParseInt(form["amount"][0], 10, 64); err != nil || n <= 0 {
			return apiError{Type: "invalid_request_error", Code: "parameter_invalid_integer", Param: "amount",
				Message: "Invalid positive integer"}, false
		}
	}
	switch kind {
	case "refund":
		if !has("payment_intent") && !has("charge") {
			return apiError{Type: "invalid_request_error", Code: "parameter_missing", Param: "payment_intent",
				Message: "One of the following params should be provided for this request: payment_intent or charge."}, false
		}
	case "payment_intent", "transfer":
		need := []string{"amount", "currency"}
		if kind == "transfer" {
			need = append(need, "destination")
		}
		for _, p := range need {
			if !has(p) {
				return missing(p)
			}
		}
	}
	return apiError{}, true
}

// faulted applies the fault to a read before route runs: no answer after a
// hang, the injected error, or a dropped connection without reading.
func (e *Emulator) faulted(route emu.Route) emu.Route {
	return func(r *http.Request) emu.Reply {
		d, ok := e.Draw(r)
		switch {
		case !ok:
			return emu.NoAnswer(d)
		case d.Error != 0:
			return d.ErrorReply(injectedError(d.Error))
		case d.Drop:
			return emu.Reply{Fault: d}
		}
		return route(r)
	}
}

// retrieve handles GET /v1/{kind}s/{id}.
func (e *Emulator) retrieve(r *http.Request, kind string) emu.Reply {
	id := r.PathValue("id")
	e.mu.Lock()
	o, ok := e.byID[id]
	var body []byte
	if ok {
		body = o.body
	}
	e.mu.Unlock()
	if !ok || o.kind != kind {
		return reply(http.StatusNotFound, errorBody(apiError{Type: "invalid_request_error", Code: "resource_missing", Param: "id",
			Message: fmt.Sprintf("No such %s: '%s'", strings.ReplaceAll(kind, "_", ""), id)}))
	}
	rep := reply(http.StatusOK, body)
	rep.Ref = id
	return rep
}

// list handles GET /v1/{kind}s: newest first, filtered by created (see
// createdRange) and by payment_intent, charge, customer or transfer_group,
// paginated by starting_after and limit.
func (e *Emulator) list(r *http.Request, kind string) emu.Reply {
	q := r.Form
	limit := 10
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			return reply(http.StatusBadRequest, errorBody(apiError{Type: "invalid_request_error", Code: "parameter_invalid_integer", Param: "limit",
				Message: "This value must be between 1 and 100 (it is currently " + v + ")."}))
		}
		limit = n
	}
	created, bad := createdRange(q)
	if bad != "" {
		return reply(http.StatusBadRequest, errorBody(apiError{Type: "invalid_request_error", Code: "parameter_invalid_integer", Param: bad,
			Message: "Invalid integer: " + q.Get(bad)}))
	}
	filters := map[string]string{}
	for _, f := range []string{"payment_intent", "charge", "customer", "transfer_group"} {
		if v := q.Get(f); v != "" {
			filters[f] = v
		}
	}
	after := q.Get("starting_after")

	e.mu.Lock()
	var data []json.RawMessage
	hasMore, skipping := false, after != ""
	for i := len(e.objects) - 1; i >= 0; i-- {
		o := e.objects[i]
		if skipping {
			skipping = o.id != after
			continue
		}
		if o.kind != kind || !created.holds(o.created) || !match(o.fields, filters) {
			continue
		}
		if len(data) == limit {
			hasMore = true
			break
		}
		data = append(data, o.body)
	}
	e.mu.Unlock()
	return listReply(r, "list", data, hasMore)
}

// createdFilter is the range of created a list allows, in Unix seconds, both ends inclusive.
type createdFilter struct{ from, to int64 }

func (rg createdFilter) holds(t int64) bool { return rg.from <= t && t <= rg.to }

// createdRange reads the created filter as Stripe takes it: created=T
// for one second, or any of created[gt], created[gte], created[lt] and
// created[lte]. bad names a parameter that is not an integer.
func createdRange(q map[string][]string) (rg createdFilter, bad string) {
	rg = createdFilter{from: math.MinInt64, to: math.MaxInt64}
	for _, p := range []string{"created", "created[gt]", "created[gte]", "created[lt]", "created[lte]"} {
		v := q[p]
		if len(v) == 0 || v[0] == "" {
			continue
		}
		n, err := strconv.ParseInt(v[0], 10, 64)
		if err != nil {
			return rg, p
		}
		switch p {
		case "created":
			rg.from, rg.to = max(rg.from, n), min(rg.to, n)
		case "created[gt]":
			rg.from = max(rg.from, n+1)
		case "created[gte]":
			rg.from = max(rg.from, n)
		case "created[lt]":
			rg.to = min(rg.to, n-1)
		case "created[lte]":
			rg.to = min(rg.to, n)
		}
	}
	return rg, ""
}

func match(fields, filters map[string]string) bool {
	for k, v := range filters {
		if fields[k] != v {
			return false
		}
	}
	return true
}

// searchClause is one term of Stripe's search query language that the
// emulator understands: metadata['key']:'value' or field:'value'.
var searchClause = regexp.MustCompile(`^(metadata\['([^']*)'\]|[a-z_]+):'((?:[^'\\]|\\.)*)'$`)

// search handles GET /v1/{kind}s/search. It is immediately consistent, which
// Stripe's is not; clients must not rely on a miss either way.
func (e *Emulator) search(r *http.Request, kind string) emu.Reply {
	meta, fields := map[string]string{}, map[string]string{}
	for _, term := range strings.Split(r.Form.Get("query"), " AND ") {
		m := searchClause.FindStringSubmatch(strings.TrimSpace(term))
		if m == nil {
			return reply(http.StatusBadRequest, errorBody(apiError{Type: "invalid_request_error", Param: "query",
				Message: "sandbox: unsupported search query term " + strconv.Quote(term) + " (supported: metadata['k']:'v' and field:'v', joined by AND)"}))
		}
		value := strings.NewReplacer(`\'`, `'`, `\\`, `\`).Replace(m[3])
		if m[2] != "" {
			meta[m[2]] = value
		} else {
			fields[m[1]] = value
		}
	}
	e.mu.Lock()
	var data []json.RawMessage
	for i := len(e.objects) - 1; i >= 0 && len(data) < 100; i-- {
		if o := e.objects[i]; o.kind == kind && match(o.meta, meta) && match(o.fields, fields) {
			data = append(data, o.body)
		}
	}
	e.mu.Unlock()
	return listReply(r, "search_result", data, false)
}

// listReply is the answer of a list or a search: Stripe's list object.
func listReply(r *http.Request, object string, data []json.RawMessage, hasMore bool) emu.Reply {
	if data == nil {
		data = []json.RawMessage{}
	}
	out := map[string]any{"object": object, "data": data, "has_more": hasMore, "url": r.URL.Path}
	if object == "search_result" {
		out["next_page"] = nil
	}
	b, _ := json.Marshal(out)
	return reply(http.StatusOK, b)
}

func randomID(n int) string {
	b := make([]byte, (n+1)/2)
	rand.Read(b)
	return hex.EncodeToString(b)[:n]
}
