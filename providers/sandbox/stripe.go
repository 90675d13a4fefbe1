package sandbox

import (
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
)

// stripeEmu emulates the parts of Stripe's API that effectd uses: creating,
// retrieving, listing and searching refunds, payment intents and transfers.
//
// Idempotency follows Stripe's documented semantics. A POST with an
// Idempotency-Key saves its first response (status and body) for the key, per
// API key, for Options.StripeKeyWindow; a later request with the same key and
// the same parameters gets that response replayed with Idempotent-Replayed:
// true, one with other parameters gets 400 idempotency_error, and one that
// arrives while the first is still running gets 409 idempotency_key_in_use.
// Requests refused before they execute (authentication, validation, 409) save
// nothing.
//
// Faults (kind "stripe") apply to every request after the key check: latency
// delays, a hang never answers and leaves nothing saved, drop creates the object
// and saves the response but closes the connection, and an injected error
// answers its status without creating anything. An injected 500 is saved as the
// key's first response, as Stripe saves a 500 from an endpoint that began
// executing, so it replays until the key expires; other injected statuses (429,
// 502, 503, ...) stand for refusals in front of the API and save nothing.
type stripeEmu struct {
	s   *Server
	now func() time.Time // replaced by tests

	mu       sync.Mutex
	keys     map[string]*stripeKey // api key + "\x00" + idempotency key
	keyFIFO  []*stripeKey          // in creation order, for pruning
	objects  []*stripeObject       // in creation order
	byID     map[string]*stripeObject
	endpoint *stripeEndpoint // where events go; nil: nowhere

	refundFailDelay time.Duration // a refund of pi_refund_fails turns failed this long after creation
}

// stripeKey is one idempotency key's saved state.
type stripeKey struct {
	scope       string
	fingerprint string // method, path and canonical form of the parameters
	at          time.Time
	done        bool // false while the first request runs
	status      int
	body        []byte
}

// stripeObject is one created refund, payment intent or transfer.
type stripeObject struct {
	id      string
	kind    string // refund | payment_intent | transfer
	created int64
	fields  map[string]string // filterable fields: payment_intent, charge, customer, transfer_group
	meta    map[string]string
	body    json.RawMessage
}

func newStripeEmu(s *Server) *stripeEmu {
	return &stripeEmu{s: s, now: time.Now, keys: map[string]*stripeKey{}, byID: map[string]*stripeObject{}, refundFailDelay: StripeRefundFailDelay}
}

func (e *stripeEmu) routes(mux *http.ServeMux) {
	for _, kind := range []string{"refund", "payment_intent", "transfer"} {
		coll := "/v1/" + kind + "s"
		mux.HandleFunc("POST "+coll, e.auth(func(w http.ResponseWriter, r *http.Request) { e.create(w, r, kind) }))
		mux.HandleFunc("GET "+coll, e.auth(func(w http.ResponseWriter, r *http.Request) { e.list(w, r, kind) }))
		mux.HandleFunc("GET "+coll+"/{id}", e.auth(func(w http.ResponseWriter, r *http.Request) { e.retrieve(w, r, kind) }))
	}
	mux.HandleFunc("PUT /_sandbox/stripe/webhook", e.setWebhook)
	mux.HandleFunc("DELETE /_sandbox/stripe/webhook", e.deleteWebhook)
	mux.HandleFunc("GET /v1/payment_intents/search", e.auth(func(w http.ResponseWriter, r *http.Request) { e.search(w, r, "payment_intent") }))
}

// stripeError is Stripe's error body.
type stripeError struct {
	Type    string `json:"type"`
	Code    string `json:"code,omitempty"`
	Param   string `json:"param,omitempty"`
	Message string `json:"message"`
}

func stripeErrorBody(se stripeError) []byte {
	b, _ := json.Marshal(map[string]stripeError{"error": se})
	return b
}

// record appends one call to the ledger.
func (e *stripeEmu) record(r *http.Request, status int, applied bool, ref string, d Decision) {
	e.s.Ledger.RecordCall(Call{
		At: e.now(), Kind: "stripe", Method: r.Method, Path: r.URL.Path,
		Key: r.Header.Get("Idempotency-Key"), Status: status, Applied: applied, Ref: ref, Fault: d.Name(),
	})
}

// reply writes a JSON answer.
func stripeReply(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Request-Id", "req_"+stripeRandomID(12))
	w.WriteHeader(status)
	w.Write(body)
}

// auth refuses requests without a test-mode secret key, as Stripe does.
func (e *stripeEmu) auth(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		key, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		if !ok || !strings.HasPrefix(key, "sk_test_") {
			e.record(r, http.StatusUnauthorized, false, "", Decision{})
			stripeReply(w, http.StatusUnauthorized, stripeErrorBody(stripeError{
				Type:    "invalid_request_error",
				Message: "Invalid API Key provided: the sandbox accepts any secret key starting with sk_test_, sent as Authorization: Bearer sk_test_...",
			}))
			return
		}
		if err := r.ParseForm(); err != nil {
			e.record(r, http.StatusBadRequest, false, "", Decision{})
			stripeReply(w, http.StatusBadRequest, stripeErrorBody(stripeError{Type: "invalid_request_error", Message: "Invalid request body: " + err.Error()}))
			return
		}
		next(w, r)
	}
}

// create handles POST /v1/{refunds,payment_intents,transfers}.
func (e *stripeEmu) create(w http.ResponseWriter, r *http.Request, kind string) {
	if se, ok := validateStripe(kind, r.PostForm); !ok {
		e.record(r, http.StatusBadRequest, false, "", Decision{})
		stripeReply(w, http.StatusBadRequest, stripeErrorBody(se))
		return
	}
	apiKey := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	var k *stripeKey
	if idem := r.Header.Get("Idempotency-Key"); idem != "" {
		var status int
		var body []byte
		var replayed bool
		k, status, body, replayed = e.claimKey(apiKey+"\x00"+idem, r.Method+" "+r.URL.Path+"?"+r.PostForm.Encode())
		if k == nil {
			if replayed {
				w.Header().Set("Idempotent-Replayed", "true")
			}
			e.record(r, status, false, stripeReplayedRef(body), Decision{})
			stripeReply(w, status, body)
			return
		}
	}

	d := e.s.Faults.Decide("stripe")
	if !d.Before(r.Context(), w) {
		e.release(k)
		e.record(r, 0, false, "", d)
		return
	}
	if d.Error != 0 {
		body := stripeErrorBody(stripeError{Type: "api_error", Message: "sandbox: injected error " + strconv.Itoa(d.Error)})
		if d.Error == http.StatusInternalServerError {
			e.save(k, d.Error, body)
		} else {
			e.release(k)
		}
		e.record(r, d.Error, false, "", d)
		if d.RetryAfter > 0 {
			w.Header().Set("Retry-After", strconv.Itoa(d.RetryAfter))
		}
		stripeReply(w, d.Error, body)
		return
	}

	obj := e.newObject(kind, r.PostForm)
	ledgerKey := r.Header.Get("Idempotency-Key")
	if ledgerKey == "" {
		ledgerKey = obj.id // no key: every request is its own effect
	}
	e.s.Ledger.Apply("stripe", ledgerKey, obj.id, obj.body)
	e.save(k, http.StatusOK, obj.body)
	e.record(r, http.StatusOK, true, obj.id, d)
	// Events start after the answer is written: a later change rewrites obj.body.
	if d.Drop {
		e.created(obj, r.Header.Get("Idempotency-Key"))
		DropResponse(w)
		return
	}
	stripeReply(w, http.StatusOK, obj.body)
	e.created(obj, r.Header.Get("Idempotency-Key"))
}

// claimKey looks the idempotency key up. It returns the key, now marked as
// running, when this request is the first; otherwise the answer to give.
func (e *stripeEmu) claimKey(scope, fingerprint string) (k *stripeKey, status int, body []byte, replayed bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	e.pruneLocked(now)
	if old, ok := e.keys[scope]; ok {
		idem := scope[strings.IndexByte(scope, 0)+1:]
		switch {
		case old.fingerprint != fingerprint:
			return nil, http.StatusBadRequest, stripeErrorBody(stripeError{
				Type: "idempotency_error",
				Message: fmt.Sprintf("Keys for idempotent requests can only be used with the same parameters they were first used with. "+
					"Try using a key other than '%s' if you meant to execute a different request.", idem),
			}), false
		case !old.done:
			return nil, http.StatusConflict, stripeErrorBody(stripeError{
				Type: "invalid_request_error", Code: "idempotency_key_in_use",
				Message: "There is currently another in-progress request using this Stripe-Idempotency-Key " +
					"(that probably means you submitted twice, and that's fine), please try again later.",
			}), false
		default:
			return nil, old.status, old.body, true
		}
	}
	k = &stripeKey{scope: scope, fingerprint: fingerprint, at: now}
	e.keys[scope] = k
	e.keyFIFO = append(e.keyFIFO, k)
	return k, 0, nil, false
}

// pruneLocked forgets keys older than the key window.
func (e *stripeEmu) pruneLocked(now time.Time) {
	cut := now.Add(-e.s.opts.StripeKeyWindow)
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
func (e *stripeEmu) save(k *stripeKey, status int, body []byte) {
	if k == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	k.done, k.status, k.body = true, status, body
}

// release forgets k: its request never executed, so the key is free again.
func (e *stripeEmu) release(k *stripeKey) {
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
func stripeReplayedRef(body []byte) string {
	var v struct {
		ID string `json:"id"`
	}
	json.Unmarshal(body, &v)
	return v.ID
}

var stripeIDPrefix = map[string]string{"refund": "re_", "payment_intent": "pi_", "transfer": "tr_"}

// newObject creates and stores an object of kind from validated form values.
func (e *stripeEmu) newObject(kind string, form map[string][]string) *stripeObject {
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
	o := &stripeObject{id: stripeIDPrefix[kind] + stripeRandomID(24), kind: kind, created: e.now().Unix(), meta: meta, fields: map[string]string{}}
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
			o.fields["charge"] = "ch_" + stripeRandomID(24)
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
		m["client_secret"] = o.id + "_secret_" + stripeRandomID(16)
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

// validateStripe checks the parameters of a create request as Stripe does.
func validateStripe(kind string, form map[string][]string) (stripeError, bool) {
	has := func(k string) bool { return len(form[k]) > 0 && form[k][0] != "" }
	missing := func(p string) (stripeError, bool) {
		return stripeError{Type: "invalid_request_error", Code: "parameter_missing", Param: p, Message: "Missing required param: " + p + "."}, false
	}
	if has("amount") {
		if n, err := strconv.ParseInt(form["amount"][0], 10, 64); err != nil || n <= 0 {
			return stripeError{Type: "invalid_request_error", Code: "parameter_invalid_integer", Param: "amount",
				Message: "Invalid positive integer"}, false
		}
	}
	switch kind {
	case "refund":
		if !has("payment_intent") && !has("charge") {
			return stripeError{Type: "invalid_request_error", Code: "parameter_missing", Param: "payment_intent",
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
	return stripeError{}, true
}

// fault applies the fault for a read request. It returns false when the
// request has been answered (or dropped) already.
func (e *stripeEmu) fault(w http.ResponseWriter, r *http.Request) bool {
	d := e.s.Faults.Decide("stripe")
	if !d.Before(r.Context(), w) {
		e.record(r, 0, false, "", d)
		return false
	}
	if d.Error != 0 {
		e.record(r, d.Error, false, "", d)
		d.WriteError(w, string(stripeErrorBody(stripeError{Type: "api_error", Message: "sandbox: injected error " + strconv.Itoa(d.Error)})))
		return false
	}
	if d.Drop {
		e.record(r, 0, false, "", d)
		DropResponse(w)
		return false
	}
	return true
}

// retrieve handles GET /v1/{kind}s/{id}.
func (e *stripeEmu) retrieve(w http.ResponseWriter, r *http.Request, kind string) {
	if !e.fault(w, r) {
		return
	}
	id := r.PathValue("id")
	e.mu.Lock()
	o, ok := e.byID[id]
	var body []byte
	if ok {
		body = o.body
	}
	e.mu.Unlock()
	if !ok || o.kind != kind {
		e.record(r, http.StatusNotFound, false, "", Decision{})
		stripeReply(w, http.StatusNotFound, stripeErrorBody(stripeError{Type: "invalid_request_error", Code: "resource_missing", Param: "id",
			Message: fmt.Sprintf("No such %s: '%s'", strings.ReplaceAll(kind, "_", ""), id)}))
		return
	}
	e.record(r, http.StatusOK, false, id, Decision{})
	stripeReply(w, http.StatusOK, body)
}

// list handles GET /v1/{kind}s: newest first, filtered by created (see
// stripeCreatedRange) and by payment_intent, charge, customer or
// transfer_group, paginated by starting_after and limit.
func (e *stripeEmu) list(w http.ResponseWriter, r *http.Request, kind string) {
	if !e.fault(w, r) {
		return
	}
	q := r.Form
	limit := 10
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > 100 {
			e.record(r, http.StatusBadRequest, false, "", Decision{})
			stripeReply(w, http.StatusBadRequest, stripeErrorBody(stripeError{Type: "invalid_request_error", Code: "parameter_invalid_integer", Param: "limit",
				Message: "This value must be between 1 and 100 (it is currently " + v + ")."}))
			return
		}
		limit = n
	}
	created, bad := stripeCreatedRange(q)
	if bad != "" {
		e.record(r, http.StatusBadRequest, false, "", Decision{})
		stripeReply(w, http.StatusBadRequest, stripeErrorBody(stripeError{Type: "invalid_request_error", Code: "parameter_invalid_integer", Param: bad,
			Message: "Invalid integer: " + q.Get(bad)}))
		return
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
		if o.kind != kind || !created.holds(o.created) || !stripeMatch(o.fields, filters) {
			continue
		}
		if len(data) == limit {
			hasMore = true
			break
		}
		data = append(data, o.body)
	}
	e.mu.Unlock()
	e.writeList(w, r, "list", data, hasMore)
}

// stripeRange is a list's created filter, in Unix seconds, both ends inclusive.
type stripeRange struct{ from, to int64 }

func (rg stripeRange) holds(t int64) bool { return rg.from <= t && t <= rg.to }

// stripeCreatedRange reads the created filter as Stripe takes it: created=T
// for one second, or any of created[gt], created[gte], created[lt] and
// created[lte]. bad names a parameter that is not an integer.
func stripeCreatedRange(q map[string][]string) (rg stripeRange, bad string) {
	rg = stripeRange{from: math.MinInt64, to: math.MaxInt64}
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

func stripeMatch(fields, filters map[string]string) bool {
	for k, v := range filters {
		if fields[k] != v {
			return false
		}
	}
	return true
}

// stripeSearchClause is one term of Stripe's search query language that the
// emulator understands: metadata['key']:'value' or field:'value'.
var stripeSearchClause = regexp.MustCompile(`^(metadata\['([^']*)'\]|[a-z_]+):'((?:[^'\\]|\\.)*)'$`)

// search handles GET /v1/{kind}s/search. It is immediately consistent, which
// Stripe's is not; clients must not rely on a miss either way.
func (e *stripeEmu) search(w http.ResponseWriter, r *http.Request, kind string) {
	if !e.fault(w, r) {
		return
	}
	meta, fields := map[string]string{}, map[string]string{}
	for _, term := range strings.Split(r.Form.Get("query"), " AND ") {
		m := stripeSearchClause.FindStringSubmatch(strings.TrimSpace(term))
		if m == nil {
			e.record(r, http.StatusBadRequest, false, "", Decision{})
			stripeReply(w, http.StatusBadRequest, stripeErrorBody(stripeError{Type: "invalid_request_error", Param: "query",
				Message: "sandbox: unsupported search query term " + strconv.Quote(term) + " (supported: metadata['k']:'v' and field:'v', joined by AND)"}))
			return
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
		if o := e.objects[i]; o.kind == kind && stripeMatch(o.meta, meta) && stripeMatch(o.fields, fields) {
			data = append(data, o.body)
		}
	}
	e.mu.Unlock()
	e.writeList(w, r, "search_result", data, false)
}

func (e *stripeEmu) writeList(w http.ResponseWriter, r *http.Request, object string, data []json.RawMessage, hasMore bool) {
	if data == nil {
		data = []json.RawMessage{}
	}
	out := map[string]any{"object": object, "data": data, "has_more": hasMore, "url": r.URL.Path}
	if object == "search_result" {
		out["next_page"] = nil
	}
	b, _ := json.Marshal(out)
	e.record(r, http.StatusOK, false, "", Decision{})
	stripeReply(w, http.StatusOK, b)
}

func stripeRandomID(n int) string {
	b := make([]byte, (n+1)/2)
	rand.Read(b)
	return hex.EncodeToString(b)[:n]
}
