package sandbox

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// The Twilio emulator serves Messages create, list and fetch under
// /2010-04-01/Accounts/{AccountSid}/, answering in Twilio's JSON shapes so that
// twilio-go decodes them.
//
// Authentication is HTTP Basic: the user must be the path's account SID and the
// password any non-empty token; anything else is 401 (code 20003).
//
// There is no idempotency: every accepted POST creates a new message (SID "SM"
// followed by 32 hex digits) and applies a "twilio" effect keyed by that SID.
//
// A message reads as "queued" with a null date_sent until the queue delay has
// passed since its creation (default 1s, see SetTwilioQueueDelay), then as
// "sent" with date_sent = date_created + delay, and once the delivery delay
// has passed too (default 250ms, SetTwilioDeliveryDelay) as "delivered" — or
// "undelivered" with error_code 30003 for To +15558675310. The state is
// computed when read. A message created with a StatusCallback has each status
// (queued, sent, then delivered or undelivered) POSTed to that URL as it is
// reached, in real time, once each, as Twilio does: form-encoded MessageSid,
// MessageStatus, ErrorCode, … and signed in X-Twilio-Signature with the auth
// token that created the message. The ledger lists each in its callbacks.
//
// Validation follows Twilio, including its magic test numbers:
//
//	To missing                 400 21604
//	To not E.164               400 21211
//	To   +15005550001          400 21211 (invalid number)
//	To   +15005550002          400 21612 (cannot route to this number)
//	To   +15005550003          400 21408 (no permission for the region)
//	To   +15005550004          400 21610 (recipient unsubscribed: replied STOP)
//	To   +15005550009          400 21614 (not a mobile number)
//	From and MessagingServiceSid missing  400 21603
//	From +15005550001          400 21212 (invalid From)
//	From +15005550007          400 21606 (From not owned by the account)
//	Body missing               400 21602
//	Body over 1600 characters  400 21617
//
// Faults of kind "twilio" apply to every route; an injected error answers in
// Twilio's error shape with code 20429 for 429 and 20000+status otherwise.

// Magic test numbers of the Twilio emulator.
const (
	TwilioInvalidNumber      = "+15005550001" // To: 21211; From: 21212
	TwilioUnroutableNumber   = "+15005550002" // To: 21612
	TwilioNoPermissionNumber = "+15005550003" // To: 21408
	TwilioUnsubscribedNumber = "+15005550004" // To: 21610
	TwilioNotMobileNumber    = "+15005550009" // To: 21614
	TwilioNotOwnedNumber     = "+15005550007" // From: 21606
	TwilioUndeliveredNumber  = "+15558675310" // accepted, then undelivered with error 30003
)

// twilioUnreachable is the error code of a message to TwilioUndeliveredNumber.
const twilioUnreachable = 30003

// twilioDefaultQueueDelay is how long a new message reads as queued, and
// twilioDefaultDeliveryDelay how long it then reads as sent.
const (
	twilioDefaultQueueDelay    = time.Second
	twilioDefaultDeliveryDelay = 250 * time.Millisecond
)

var twilioE164 = regexp.MustCompile(`^\+[1-9]\d{6,14}$`)

// twilioToErrors and twilioFromErrors are the magic numbers' answers.
var (
	twilioToErrors = map[string]twilioError{
		TwilioInvalidNumber:      {Code: 21211, Message: "The 'To' number is not a valid phone number."},
		TwilioUnroutableNumber:   {Code: 21612, Message: "The 'To' phone number is not currently reachable via SMS."},
		TwilioNoPermissionNumber: {Code: 21408, Message: "Permission to send an SMS has not been enabled for the region indicated by the 'To' number."},
		TwilioUnsubscribedNumber: {Code: 21610, Message: "Attempt to send to unsubscribed recipient"},
		TwilioNotMobileNumber:    {Code: 21614, Message: "'To' number is not a valid mobile number"},
	}
	twilioFromErrors = map[string]twilioError{
		TwilioInvalidNumber:  {Code: 21212, Message: "The 'From' number is not a valid phone number, shortcode, or alphanumeric sender ID."},
		TwilioNotOwnedNumber: {Code: 21606, Message: "The 'From' phone number provided is not a valid message-capable Twilio phone number for this destination/account."},
	}
)

// TwilioMessage is one message the Twilio emulator accepted.
type TwilioMessage struct {
	SID                 string    `json:"sid"`
	AccountSID          string    `json:"account_sid"`
	To                  string    `json:"to"`
	From                string    `json:"from,omitempty"`
	MessagingServiceSID string    `json:"messaging_service_sid,omitempty"`
	Body                string    `json:"body"`
	StatusCallback      string    `json:"status_callback,omitempty"`
	Created             time.Time `json:"created"`
	authToken           string    // signs its status callbacks
}

// twilioError is Twilio's error body.
type twilioError struct {
	Code     int    `json:"code"`
	Message  string `json:"message"`
	MoreInfo string `json:"more_info"`
	Status   int    `json:"status"`
}

func newTwilioError(status, code int, message string) twilioError {
	return twilioError{Code: code, Message: message, MoreInfo: "https://www.twilio.com/docs/errors/" + strconv.Itoa(code), Status: status}
}

// twilioEmu emulates Twilio's Messages API. It is safe for concurrent use.
type twilioEmu struct {
	s   *Server
	now func() time.Time

	mu            sync.Mutex
	queueDelay    time.Duration
	deliveryDelay time.Duration
	msgs          []TwilioMessage // in creation order; the index orders lists
	bySID         map[string]int  // SID → index in msgs
}

func newTwilioEmu(s *Server) *twilioEmu {
	return &twilioEmu{s: s, now: time.Now, queueDelay: twilioDefaultQueueDelay, deliveryDelay: twilioDefaultDeliveryDelay, bySID: map[string]int{}}
}

func (e *twilioEmu) routes(mux *http.ServeMux) {
	mux.HandleFunc("POST /2010-04-01/Accounts/{sid}/Messages.json", e.handle(e.create))
	mux.HandleFunc("GET /2010-04-01/Accounts/{sid}/Messages.json", e.handle(e.list))
	mux.HandleFunc("GET /2010-04-01/Accounts/{sid}/Messages/{msid}", e.handle(e.fetch))
}

// TwilioMessages returns the messages the Twilio emulator accepted for to
// (every message when to is empty), oldest first.
func (s *Server) TwilioMessages(to string) []TwilioMessage {
	e := s.twilio
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []TwilioMessage
	for _, m := range e.msgs {
		if to == "" || m.To == to {
			out = append(out, m)
		}
	}
	return out
}

// SetTwilioQueueDelay sets how long a new message reads as queued (date_sent
// null) before it reads as sent; 0 makes messages sent at once.
func (s *Server) SetTwilioQueueDelay(d time.Duration) {
	e := s.twilio
	e.mu.Lock()
	defer e.mu.Unlock()
	e.queueDelay = d
}

// SetTwilioDeliveryDelay sets how long a sent message reads as sent before it
// reads as delivered (or undelivered).
func (s *Server) SetTwilioDeliveryDelay(d time.Duration) {
	e := s.twilio
	e.mu.Lock()
	defer e.mu.Unlock()
	e.deliveryDelay = d
}

// twilioReply is what one route answers.
type twilioReply struct {
	status  int
	body    any
	ref     string
	applied bool
}

func twilioFail(status, code int, message string) twilioReply {
	return twilioReply{status: status, body: newTwilioError(status, code, message)}
}

// handle authenticates, injects faults and records the call around op.
func (e *twilioEmu) handle(op func(r *http.Request) twilioReply) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		call := Call{Kind: "twilio", Method: r.Method, Path: r.URL.Path}
		recorded := false
		defer func() {
			if !recorded {
				e.s.Ledger.RecordCall(call)
			}
		}()

		if user, pass, ok := r.BasicAuth(); !ok || user == "" || pass == "" || user != r.PathValue("sid") {
			call.Status = http.StatusUnauthorized
			w.Header().Set("WWW-Authenticate", `Basic realm="Twilio API"`)
			writeJSON(w, call.Status, newTwilioError(call.Status, 20003, "Authenticate"))
			return
		}
		// Read the whole form first: only then does net/http notice a client
		// that goes away, which is what ends an injected hang.
		r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
		if err := r.ParseForm(); err != nil {
			call.Status = http.StatusBadRequest
			writeJSON(w, call.Status, newTwilioError(call.Status, 20001, "Invalid form: "+err.Error()))
			return
		}
		d := e.s.Faults.Decide("twilio")
		call.Fault = d.Name()
		if !d.Before(r.Context(), w) {
			return
		}
		if d.Error != 0 {
			call.Status = d.Error
			code := 20000 + d.Error
			body, _ := json.Marshal(newTwilioError(d.Error, code, http.StatusText(d.Error)))
			d.WriteError(w, string(body))
			return
		}
		rep := op(r)
		call.Status, call.Ref, call.Applied = rep.status, rep.ref, rep.applied
		if d.Drop {
			// Record before the connection drops, so that the ledger has the
			// call by the time the client sees the error.
			e.s.Ledger.RecordCall(call)
			recorded = true
			DropResponse(w)
			return
		}
		writeJSON(w, rep.status, rep.body)
	}
}

func (e *twilioEmu) create(r *http.Request) twilioReply {
	f := r.PostForm
	m := TwilioMessage{
		AccountSID:          r.PathValue("sid"),
		To:                  f.Get("To"),
		From:                f.Get("From"),
		MessagingServiceSID: f.Get("MessagingServiceSid"),
		Body:                f.Get("Body"),
		StatusCallback:      f.Get("StatusCallback"),
	}
	_, m.authToken, _ = r.BasicAuth()
	if m.To == "" {
		return twilioFail(http.StatusBadRequest, 21604, "A 'To' phone number is required.")
	}
	if !twilioE164.MatchString(m.To) {
		return twilioFail(http.StatusBadRequest, 21211, "The 'To' number "+m.To+" is not a valid phone number.")
	}
	if te, ok := twilioToErrors[m.To]; ok {
		return twilioFail(http.StatusBadRequest, te.Code, te.Message)
	}
	if m.From == "" && m.MessagingServiceSID == "" {
		return twilioFail(http.StatusBadRequest, 21603, "A 'From' phone number is required.")
	}
	if te, ok := twilioFromErrors[m.From]; ok {
		return twilioFail(http.StatusBadRequest, te.Code, te.Message)
	}
	if m.Body == "" {
		return twilioFail(http.StatusBadRequest, 21602, "Message body is required.")
	}
	if utf8.RuneCountInString(m.Body) > 1600 {
		return twilioFail(http.StatusBadRequest, 21617, "The concatenated message body exceeds the 1600 character limit.")
	}

	m.SID = twilioSID()
	m.Created = e.now().UTC().Truncate(time.Second) // Twilio's dates have whole seconds
	e.mu.Lock()
	e.bySID[m.SID] = len(e.msgs)
	e.msgs = append(e.msgs, m)
	out := e.render(m, m.Created)
	queue, deliver := e.queueDelay, e.deliveryDelay
	e.mu.Unlock()
	if m.StatusCallback != "" {
		go e.callbacks(m, queue, deliver)
	}

	effect, _ := json.Marshal(map[string]string{"to": m.To, "from": m.From, "messaging_service_sid": m.MessagingServiceSID, "body": m.Body})
	e.s.Ledger.Apply("twilio", m.SID, m.SID, effect)
	return twilioReply{status: http.StatusCreated, body: out, ref: m.SID, applied: true}
}

func (e *twilioEmu) fetch(r *http.Request) twilioReply {
	sid, ok := strings.CutSuffix(r.PathValue("msid"), ".json")
	e.mu.Lock()
	defer e.mu.Unlock()
	i, found := e.bySID[sid]
	if !ok || !found || e.msgs[i].AccountSID != r.PathValue("sid") {
		return twilioFail(http.StatusNotFound, 20404, "The requested resource "+r.URL.Path+" was not found")
	}
	return twilioReply{status: http.StatusOK, body: e.render(e.msgs[i], e.now()), ref: sid}
}

// twilioListFilter is a list request's filter.
type twilioListFilter struct {
	account, to, from string
	sentFrom, sentTo  time.Time // inclusive, exclusive; zero = open
	bySent            bool      // some DateSent filter is set: queued messages never match
}

func (e *twilioEmu) list(r *http.Request) twilioReply {
	q := r.URL.Query()
	flt := twilioListFilter{account: r.PathValue("sid"), to: q.Get("To"), from: q.Get("From")}
	for _, name := range []string{"DateSent", "DateSent>", "DateSent<"} {
		v := q.Get(name)
		if v == "" {
			continue
		}
		t, dateOnly, err := twilioParseDate(v)
		if err != nil {
			return twilioFail(http.StatusBadRequest, 20001, "Invalid "+name+": "+v)
		}
		flt.bySent = true
		switch {
		case name == "DateSent":
			day := t.Truncate(24 * time.Hour)
			flt.sentFrom, flt.sentTo = day, day.Add(24*time.Hour)
		case name == "DateSent>":
			flt.sentFrom = t
		case dateOnly: // DateSent<=day includes the whole day
			flt.sentTo = t.Add(24 * time.Hour)
		default:
			flt.sentTo = t.Add(time.Second)
		}
	}
	pageSize, bad := twilioIntParam(q, "PageSize", 50, 1, 1000)
	if bad != "" {
		return twilioFail(http.StatusBadRequest, 20001, bad)
	}
	page, bad := twilioIntParam(q, "Page", 0, 0, 1<<30)
	if bad != "" {
		return twilioFail(http.StatusBadRequest, 20001, bad)
	}

	e.mu.Lock()
	defer e.mu.Unlock()
	now := e.now()
	// Newest first. A PageToken ("PA" + SID of the previous page's last
	// message) anchors the page, so messages created meanwhile do not shift it.
	start := len(e.msgs) - 1
	if tok := q.Get("PageToken"); tok != "" {
		i, ok := e.bySID[strings.TrimPrefix(tok, "PA")]
		if !ok {
			return twilioFail(http.StatusBadRequest, 20001, "Invalid PageToken: "+tok)
		}
		start = i - 1
	} else if page > 0 {
		return twilioFail(http.StatusBadRequest, 20001, "Page without PageToken")
	}
	msgs := []map[string]any{}
	next, last := any(nil), ""
	for i := start; i >= 0; i-- {
		m := e.msgs[i]
		if !e.matches(m, flt, now) {
			continue
		}
		if len(msgs) == pageSize {
			nq := twilioFilterQuery(q, pageSize)
			nq.Set("Page", strconv.Itoa(page+1))
			nq.Set("PageToken", "PA"+last)
			next = r.URL.Path + "?" + nq.Encode()
			break
		}
		msgs = append(msgs, e.render(m, now))
		last = m.SID
	}
	first := twilioFilterQuery(q, pageSize)
	first.Set("Page", "0")
	return twilioReply{status: http.StatusOK, body: map[string]any{
		"messages":          msgs,
		"uri":               r.URL.RequestURI(),
		"first_page_uri":    r.URL.Path + "?" + first.Encode(),
		"next_page_uri":     next,
		"previous_page_uri": nil,
		"page":              page,
		"page_size":         pageSize,
		"start":             page * pageSize,
		"end":               page*pageSize + max(len(msgs)-1, 0),
	}}
}

// matches reports whether m passes flt at now. The caller holds e.mu.
func (e *twilioEmu) matches(m TwilioMessage, flt twilioListFilter, now time.Time) bool {
	if m.AccountSID != flt.account || (flt.to != "" && m.To != flt.to) || (flt.from != "" && m.From != flt.from) {
		return false
	}
	if !flt.bySent {
		return true
	}
	sent, ok := e.sentAt(m, now)
	return ok && !sent.Before(flt.sentFrom) && (flt.sentTo.IsZero() || sent.Before(flt.sentTo))
}

// sentAt is when m was sent, or false while it is queued. The caller holds e.mu.
func (e *twilioEmu) sentAt(m TwilioMessage, now time.Time) (time.Time, bool) {
	sent := m.Created.Add(e.queueDelay)
	if now.Before(sent) {
		return time.Time{}, false
	}
	return sent, true
}

// finalStatus is where m ends: delivered, or undelivered with an error code.
func (m TwilioMessage) finalStatus() (string, int) {
	if m.To == TwilioUndeliveredNumber {
		return "undelivered", twilioUnreachable
	}
	return "delivered", 0
}

// render shapes m as Twilio's Message resource at now. The caller holds e.mu.
func (e *twilioEmu) render(m TwilioMessage, now time.Time) map[string]any {
	uri := "/2010-04-01/Accounts/" + m.AccountSID + "/Messages/" + m.SID
	status, dateSent, updated, errCode, errMsg := "queued", any(nil), m.Created, any(nil), any(nil)
	if sent, ok := e.sentAt(m, now); ok {
		status, dateSent, updated = "sent", twilioDate(sent), sent
		if done := sent.Add(e.deliveryDelay); !now.Before(done) {
			var code int
			status, code = m.finalStatus()
			updated = done
			if code != 0 {
				errCode, errMsg = code, "Unreachable destination handset"
			}
		}
	}
	return map[string]any{
		"sid":                   m.SID,
		"account_sid":           m.AccountSID,
		"api_version":           "2010-04-01",
		"body":                  m.Body,
		"date_created":          twilioDate(m.Created),
		"date_sent":             dateSent,
		"date_updated":          twilioDate(updated),
		"direction":             "outbound-api",
		"error_code":            errCode,
		"error_message":         errMsg,
		"from":                  twilioNullable(m.From), // assigned later when sent through a messaging service
		"messaging_service_sid": twilioNullable(m.MessagingServiceSID),
		"num_media":             "0",
		"num_segments":          "1",
		"price":                 nil,
		"price_unit":            "USD",
		"status":                status,
		"to":                    m.To,
		"uri":                   uri + ".json",
		"subresource_uris": map[string]string{
			"media":    uri + "/Media.json",
			"feedback": uri + "/Feedback.json",
		},
	}
}

func twilioNullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// twilioDate formats t as Twilio does (RFC 2822, GMT).
func twilioDate(t time.Time) string { return t.UTC().Format(time.RFC1123Z) }

// twilioParseDate reads a DateSent filter: an RFC 3339 time or a YYYY-MM-DD day.
func twilioParseDate(v string) (t time.Time, dateOnly bool, err error) {
	if t, err := time.Parse(time.DateOnly, v); err == nil {
		return t, true, nil
	}
	t, err = time.Parse(time.RFC3339, v)
	return t, false, err
}

// twilioIntParam reads an integer query parameter within [lo, hi], def when
// absent. bad is Twilio's message for a value that is not one, else "".
func twilioIntParam(q url.Values, name string, def, lo, hi int) (n int, bad string) {
	v := q.Get(name)
	if v == "" {
		return def, ""
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, fmt.Sprintf("Invalid %s: %q", name, v)
	}
	return n, ""
}

// twilioFilterQuery copies the filters of q, for page links.
func twilioFilterQuery(q url.Values, pageSize int) url.Values {
	out := url.Values{}
	for _, k := range []string{"To", "From", "DateSent", "DateSent>", "DateSent<"} {
		if v := q.Get(k); v != "" {
			out.Set(k, v)
		}
	}
	out.Set("PageSize", strconv.Itoa(pageSize))
	return out
}

// twilioSID returns a new message SID: "SM" and 32 hex digits.
func twilioSID() string {
	var b [16]byte
	rand.Read(b[:])
	return "SM" + hex.EncodeToString(b[:])
}

// callbacks POSTs m's statuses to its StatusCallback as they are reached:
// queued at once, sent after queue, the final status deliver later.
func (e *twilioEmu) callbacks(m TwilioMessage, queue, deliver time.Duration) {
	final, code := m.finalStatus()
	e.postStatus(m, "queued", 0)
	time.Sleep(queue)
	e.postStatus(m, "sent", 0)
	time.Sleep(deliver)
	e.postStatus(m, final, code)
}

// twilioCallbackClient sends status callbacks.
var twilioCallbackClient = &http.Client{Timeout: 5 * time.Second}

// postStatus sends one status callback, once, signed as Twilio signs it.
func (e *twilioEmu) postStatus(m TwilioMessage, status string, code int) {
	form := url.Values{
		"MessageSid": {m.SID}, "SmsSid": {m.SID}, "AccountSid": {m.AccountSID},
		"To": {m.To}, "MessageStatus": {status}, "SmsStatus": {status}, "ApiVersion": {"2010-04-01"},
	}
	if m.From != "" {
		form.Set("From", m.From)
	}
	if m.MessagingServiceSID != "" {
		form.Set("MessagingServiceSid", m.MessagingServiceSID)
	}
	if code != 0 {
		form.Set("ErrorCode", strconv.Itoa(code))
	}
	cb := Callback{Kind: "twilio", URL: m.StatusCallback, Ref: m.SID, Status: status, Try: 1}
	defer func() { e.s.Ledger.RecordCallback(cb) }()
	req, err := http.NewRequest(http.MethodPost, m.StatusCallback, strings.NewReader(form.Encode()))
	if err != nil {
		cb.Error = err.Error()
		return
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("User-Agent", "TwilioProxy/1.1")
	req.Header.Set("X-Twilio-Signature", TwilioSignature(m.authToken, m.StatusCallback, form))
	resp, err := twilioCallbackClient.Do(req)
	if err != nil {
		cb.Error = err.Error()
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	cb.Answer = resp.StatusCode
}

// TwilioSignature is Twilio's X-Twilio-Signature of a form POST to fullURL:
// base64 of HMAC-SHA1 keyed by the auth token over the URL followed by every
// parameter name and value, sorted by name.
func TwilioSignature(authToken, fullURL string, form url.Values) string {
	keys := make([]string, 0, len(form))
	for k := range form {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	b.WriteString(fullURL)
	for _, k := range keys {
		for _, v := range form[k] {
			b.WriteString(k)
			b.WriteString(v)
		}
	}
	mac := hmac.New(sha1.New, []byte(authToken))
	mac.Write([]byte(b.String()))
	return base64.StdEncoding.EncodeToString(mac.Sum(nil))
}
