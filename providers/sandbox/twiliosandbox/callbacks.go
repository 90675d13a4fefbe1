package twiliosandbox

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/base64"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/effectd/effectd/providers/sandbox/internal/emu"
)

// callbacks POSTs m's statuses to its StatusCallback as they are reached:
// queued at once, sent after queue, the final status deliver later.
func (e *Emulator) callbacks(m Message, queue, deliver time.Duration) {
	final, code := m.finalStatus()
	e.postStatus(m, "queued", 0)
	time.Sleep(queue)
	e.postStatus(m, "sent", 0)
	time.Sleep(deliver)
	e.postStatus(m, final, code)
}

// callbackClient sends status callbacks.
var callbackClient = &http.Client{Timeout: 5 * time.Second}

// postStatus sends one status callback, once, signed as Twilio signs it.
func (e *Emulator) postStatus(m Message, status string, code int) {
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
	cb := emu.Callback{Kind: "twilio", URL: m.StatusCallback, Ref: m.SID, Status: status, Try: 1}
	defer func() { e.Ledger.RecordCallback(cb) }()
	req, err := http.NewRequest(http.MethodPost, m.StatusCallback, strings.NewReader(form.Encode()))
	if err != nil {
		cb.Error = err.Error()
		return
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("User-Agent", "TwilioProxy/1.1")
	req.Header.Set("X-Twilio-Signature", Signature(m.authToken, m.StatusCallback, form))
	resp, err := callbackClient.Do(req)
	if err != nil {
		cb.Error = err.Error()
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	cb.Answer = resp.StatusCode
}

// Signature is Twilio's X-Twilio-Signature of a form POST to fullURL:
// base64 of HMAC-SHA1 keyed by the auth token over the URL followed by every
// parameter name and value, sorted by name.
func Signature(authToken, fullURL string, form url.Values) string {
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
