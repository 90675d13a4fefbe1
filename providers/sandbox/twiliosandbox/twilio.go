package twiliosandbox

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/effectd/effectd/providers/sandbox/internal/emu"
)

// Magic test numbers of the Twilio emulator.
const (
	InvalidNumber      = "+15005550001" // To: 21211; From: 21212
	UnroutableNumber   = "+15005550002" // To: 21612
	NoPermissionNumber = "+15005550003" // To: 21408
	UnsubscribedNumber = "+15005550004" // To: 21610
	NotMobileNumber    = "+15005550009" // To: 21614
	NotOwnedNumber     = "+15005550007" // From: 21606
	UndeliveredNumber  = "+15558675310" // accepted, then undelivered with error 30003
)

// unreachable is the error code of a message to UndeliveredNumber.
const unreachable = 30003

// defaultQueueDelay is how long a new message reads as queued, and
// defaultDeliveryDelay how long it then reads as sent.
const (
	defaultQueueDelay    = time.Second
	defaultDeliveryDelay = 250 * time.Millisecond
)

var e164 = regexp.MustCompile(`^\+[1-9]\d{6,14}$`)

// toErrors and fromErrors are the magic numbers' answers.
var (
	toErrors = map[string]apiError{
		InvalidNumber:      {Code: 21211, Message: "The 'To' number is not a valid phone number."},
		UnroutableNumber:   {Code: 21612, Message: "The 'To' phone number is not currently reachable via SMS."},
		NoPermissionNumber: {Code: 21408, Message: "Permission to send an SMS has not been enabled for the region indicated by the 'To' number."},
		UnsubscribedNumber: {Code: 21610, Message: "Attempt to send to unsubscribed recipient"},
		NotMobileNumber:    {Code: 21614, Message: "'To' number is not a valid mobile number"},
	}
	fromErrors = map[string]apiError{
		InvalidNumber:  {Code: 21212, Message: "The 'From' number is not a valid phone number, shortcode, or alphanumeric sender ID."},
		NotOwnedNumber: {Code: 21606, Message: "The 'From' phone number provided is not a valid message-capable Twilio phone number for this destination/account."},
	}
)

// Message is one message the Twilio emulator accepted.
type Message struct {
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

// apiError is Twilio's error body.
type apiError struct {
	Code     int    `json:"code"`
	Message  string `json:"message"`
	MoreInfo string `json:"more_info"`
	Status   int    `json:"status"`
}

func newError(status, code int, message string) apiError {
	return apiError{Code: code, Message: message, MoreInfo: "https://www.twilio.com/docs/errors/" + strconv.Itoa(code), Status: status}
}

// Emulator emulates Twilio's Messages API. It is safe for concurrent use.
type Emulator struct {
	emu.Host

	mu            sync.Mutex
	queueDelay    time.Duration
	deliveryDelay time.Duration
	msgs          []Message      // in creation order; the index orders lists
	bySID         map[string]int // SID → index in msgs
}

// New returns an emulator with no messages that records its calls in ledger
// and draws faults of kind "twilio" from faults.
func New(ledger *emu.Ledger, faults *emu.Faults) *Emulator {
	return &Emulator{
		Host:       emu.Host{Kind: "twilio", Ledger: ledger, Faults: faults, Now: time.Now, Admit: admit},
		queueDelay: defaultQueueDelay, deliveryDelay: defaultDeliveryDelay, bySID: map[string]int{},
	}
}

// Routes registers Twilio's Messages routes on mux.
func (e *Emulator) Routes(mux *http.ServeMux) {
	mux.HandleFunc("POST /2010-04-01/Accounts/{sid}/Messages.json", e.Handle(e.faulted(e.create)))
	mux.HandleFunc("GET /2010-04-01/Accounts/{sid}/Messages.json", e.Handle(e.faulted(e.list)))
	mux.HandleFunc("GET /2010-04-01/Accounts/{sid}/Messages/{msid}", e.Handle(e.faulted(e.fetch)))
}

// Messages returns the messages the emulator accepted for to (every message
// when to is empty), oldest first.
func (e *Emulator) Messages(to string) []Message {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []Message
	for _, m := range e.msgs {
		if to == "" || m.To == to {
			out = append(out, m)
		}
	}
	return out
}

// SetQueueDelay sets how long a new message reads as queued (date_sent null)
// before it reads as sent; 0 makes messages sent at once.
func (e *Emulator) SetQueueDelay(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.queueDelay = d
}

// SetDeliveryDelay sets how long a sent message reads as sent before it reads
// as delivered (or undelivered).
func (e *Emulator) SetDeliveryDelay(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.deliveryDelay = d
}

// fail is Twilio's answer to a refused request.
func fail(status, code int, message string) emu.Reply {
	return emu.JSON(status, newError(status, code, message))
}

// admit refuses requests without the path's account SID and a token in HTTP
// Basic authentication, and requests whose form does not parse. It reads the
// whole form: only then does net/http notice a client that goes away, which is
// what ends an injected hang.
func admit(w http.ResponseWriter, r *http.Request) (emu.Reply, bool) {
	if user, pass, ok := r.BasicAuth(); !ok || user == "" || pass == "" || user != r.PathValue("sid") {
		rep := fail(http.StatusUnauthorized, 20003, "Authenticate")
		rep.Header = http.Header{"Www-Authenticate": {`Basic realm="Twilio API"`}}
		return rep, false
	}
	r.Body = http.MaxBytesReader(w, r.Body, 1<<20)
	if err := r.ParseForm(); err != nil {
		return fail(http.StatusBadRequest, 20001, "Invalid form: "+err.Error()), false
	}
	return emu.Reply{}, true
}

// faulted applies the fault to every route: no answer after a hang, the
// injected error in Twilio's shape (code 20429 for 429, 20000+status
// otherwise), or route's answer, dropped when the fault drops it.
func (e *Emulator) faulted(route emu.Route) emu.Route {
	return func(r *http.Request) emu.Reply {
		d, ok := e.Draw(r)
		if !ok {
			return emu.NoAnswer(d)
		}
		if d.Error != 0 {
			body, _ := json.Marshal(newError(d.Error, 20000+d.Error, http.StatusText(d.Error)))
			return d.ErrorReply(body)
		}
		rep := route(r)
		rep.Fault = d
		return rep
	}
}

func (e *Emulator) create(r *http.Request) emu.Reply {
	f := r.PostForm
	m := Message{
		AccountSID:          r.PathValue("sid"),
		To:                  f.Get("To"),
		From:                f.Get("From"),
		MessagingServiceSID: f.Get("MessagingServiceSid"),
		Body:                f.Get("Body"),
		StatusCallback:      f.Get("StatusCallback"),
	}
	_, m.authToken, _ = r.BasicAuth()
	if m.To == "" {
		return fail(http.StatusBadRequest, 21604, "A 'To' phone number is required.")
	}
	if !e164.MatchString(m.To) {
		return fail(http.StatusBadRequest, 21211, "The 'To' number "+m.To+" is not a valid phone number.")
	}
	if te, ok := toErrors[m.To]; ok {
		return fail(http.StatusBadRequest, te.Code, te.Message)
	}
	if m.From == "" && m.MessagingServiceSID == "" {
		return fail(http.StatusBadRequest, 21603, "A 'From' phone number is required.")
	}
	if te, ok := fromErrors[m.From]; ok {
		return fail(http.StatusBadRequest, te.Code, te.Message)
	}
	if m.Body == "" {
		return fail(http.StatusBadRequest, 21602, "Message body is required.")
	}
	if utf8.RuneCountInString(m.Body) > 1600 {
		return fail(http.StatusBadRequest, 21617, "The concatenated message body exceeds the 1600 character limit.")
	}

	m.SID = newSID()
	m.Created = e.Now().UTC().Truncate(time.Second) // Twilio's dates have whole seconds
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
	e.Ledger.Apply("twilio", m.SID, m.SID, effect)
	rep := emu.JSON(http.StatusCreated, out)
	rep.Ref, rep.Applied = m.SID, true
	return rep
}

func (e *Emulator) fetch(r *http.Request) emu.Reply {
	sid, ok := strings.CutSuffix(r.PathValue("msid"), ".json")
	e.mu.Lock()
	defer e.mu.Unlock()
	i, found := e.bySID[sid]
	if !ok || !found || e.msgs[i].AccountSID != r.PathValue("sid") {
		return fail(http.StatusNotFound, 20404, "The requested resource "+r.URL.Path+" was not found")
	}
	rep := emu.JSON(http.StatusOK, e.render(e.msgs[i], e.Now()))
	rep.Ref = sid
	return rep
}

// sentAt is when m was sent, or false while it is queued. The caller holds e.mu.
func (e *Emulator) sentAt(m Message, now time.Time) (time.Time, bool) {
	sent := m.Created.Add(e.queueDelay)
	if now.Before(sent) {
		return time.Time{}, false
	}
	return sent, true
}

// finalStatus is where m ends: delivered, or undelivered with an error code.
func (m Message) finalStatus() (string, int) {
	if m.To == UndeliveredNumber {
		return "undelivered", unreachable
	}
	return "delivered", 0
}

// render shapes m as Twilio's Message resource at now. The caller holds e.mu.
func (e *Emulator) render(m Message, now time.Time) map[string]any {
	uri := "/2010-04-01/Accounts/" + m.AccountSID + "/Messages/" + m.SID
	status, dateSent, updated, errCode, errMsg := "queued", any(nil), m.Created, any(nil), any(nil)
	if sent, ok := e.sentAt(m, now); ok {
		status, dateSent, updated = "sent", date(sent), sent
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
		"date_created":          date(m.Created),
		"date_sent":             dateSent,
		"date_updated":          date(updated),
		"direction":             "outbound-api",
		"error_code":            errCode,
		"error_message":         errMsg,
		"from":                  nullable(m.From), // assigned later when sent through a messaging service
		"messaging_service_sid": nullable(m.MessagingServiceSID),
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

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// date formats t as Twilio does (RFC 2822, GMT).
func date(t time.Time) string { return t.UTC().Format(time.RFC1123Z) }

// newSID returns a new message SID: "SM" and 32 hex digits.
func newSID() string {
	var b [16]byte
	rand.Read(b[:])
	return "SM" + hex.EncodeToString(b[:])
}
