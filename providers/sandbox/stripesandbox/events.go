package stripesandbox

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/effectd/effectd/providers/sandbox/internal/emu"
)

// Stripe webhook events. PUT /_sandbox/stripe/webhook with
// {"url":"…","secret":"whsec_…"} (and optionally "api_version") registers one
// endpoint; from then on every object change is POSTed to it as a Stripe event
// (refund.created, payment_intent.created, payment_intent.succeeded,
// transfer.created, refund.updated), signed in Stripe-Signature
// (t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>" keyed by the secret>), and
// retried with backoff until the endpoint answers 2xx (at most eventTries
// times). As with Stripe, events may arrive out of order.
//
// A refund of payment intent pi_refund_fails is created succeeded and turns
// failed (failure_reason expired_or_canceled_card) RefundFailDelay later
// (SetRefundFailDelay changes it).

// RefundFailsPI is the payment intent whose refunds fail after succeeding.
const RefundFailsPI = "pi_refund_fails"

// APIVersion is the API version the sandbox renders events in unless the
// endpoint was registered with another: stripe-go v76's.
const APIVersion = "2023-10-16"

// Timing of Stripe events.
const (
	RefundFailDelay = time.Second
	eventTries      = 8
	eventBackoff    = 100 * time.Millisecond // doubled after each try
)

// endpoint is the registered webhook endpoint.
type endpoint struct {
	URL        string `json:"url"`
	Secret     string `json:"secret"`
	APIVersion string `json:"api_version,omitempty"`
}

var eventClient = &http.Client{Timeout: 5 * time.Second}

// setWebhook handles PUT /_sandbox/stripe/webhook.
func (e *Emulator) setWebhook(w http.ResponseWriter, r *http.Request) {
	var ep endpoint
	dec := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<16))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&ep); err != nil {
		emu.JSON(http.StatusBadRequest, map[string]string{"error": "stripe webhook: " + err.Error()}).Write(w)
		return
	}
	if u, err := url.Parse(ep.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		emu.JSON(http.StatusUnprocessableEntity, map[string]string{"error": "stripe webhook: url: must be an absolute http(s) URL"}).Write(w)
		return
	}
	if ep.Secret == "" {
		emu.JSON(http.StatusUnprocessableEntity, map[string]string{"error": "stripe webhook: secret: is required"}).Write(w)
		return
	}
	if ep.APIVersion == "" {
		ep.APIVersion = APIVersion
	}
	e.mu.Lock()
	e.endpoint = &ep
	e.mu.Unlock()
	emu.JSON(http.StatusOK, map[string]string{"url": ep.URL, "api_version": ep.APIVersion}).Write(w)
}

// SetWebhook registers the endpoint that receives Stripe events, as
// PUT /_sandbox/stripe/webhook does, in the events' default API version.
func (e *Emulator) SetWebhook(url, secret string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.endpoint = &endpoint{URL: url, Secret: secret, APIVersion: APIVersion}
}

// SetRefundFailDelay sets how long after its creation a refund of
// pi_refund_fails turns failed (default RefundFailDelay).
func (e *Emulator) SetRefundFailDelay(d time.Duration) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.refundFailDelay = d
}

// deleteWebhook handles DELETE /_sandbox/stripe/webhook.
func (e *Emulator) deleteWebhook(w http.ResponseWriter, r *http.Request) {
	e.mu.Lock()
	e.endpoint = nil
	e.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// created emits the events of a new object and schedules its later changes.
func (e *Emulator) created(o *object, idemKey string) {
	e.emit(o, o.kind+".created", idemKey)
	switch {
	case o.kind == "payment_intent" && o.status() == "succeeded":
		e.emit(o, "payment_intent.succeeded", idemKey)
	case o.kind == "refund" && o.fields["payment_intent"] == RefundFailsPI:
		e.mu.Lock()
		delay := e.refundFailDelay
		e.mu.Unlock()
		time.AfterFunc(delay, func() {
			e.update(o, map[string]any{"status": "failed", "failure_reason": "expired_or_canceled_card"})
			e.emit(o, "refund.updated", "")
		})
	}
}

// update changes fields of o's body.
func (e *Emulator) update(o *object, fields map[string]any) {
	e.mu.Lock()
	defer e.mu.Unlock()
	var m map[string]any
	json.Unmarshal(o.body, &m)
	for k, v := range fields {
		m[k] = v
	}
	o.body, _ = json.Marshal(m)
}

// status is o's status field ("" for a transfer).
func (o *object) status() string {
	var v struct {
		Status string `json:"status"`
	}
	json.Unmarshal(o.body, &v)
	return v.Status
}

// emit sends one event about o, as it is now, to the registered endpoint.
func (e *Emulator) emit(o *object, typ, idemKey string) {
	e.mu.Lock()
	ep := e.endpoint
	body := o.body
	e.mu.Unlock()
	if ep == nil {
		return
	}
	var key any
	if idemKey != "" {
		key = idemKey
	}
	evt := map[string]any{
		"id": "evt_" + randomID(24), "object": "event", "api_version": ep.APIVersion,
		"created": e.Now().Unix(), "livemode": false, "pending_webhooks": 1, "type": typ,
		"data":    map[string]any{"object": json.RawMessage(body)},
		"request": map[string]any{"id": "req_" + randomID(14), "idempotency_key": key},
	}
	payload, _ := json.Marshal(evt)
	go e.deliver(*ep, evt["id"].(string), typ, o.id, statusOf(body), payload)
}

func statusOf(body []byte) string {
	var v struct {
		Status   string `json:"status"`
		Reversed bool   `json:"reversed"`
	}
	json.Unmarshal(body, &v)
	if v.Status == "" && v.Reversed {
		return "reversed"
	}
	return v.Status
}

// deliver POSTs one event until the endpoint answers 2xx, backing off.
func (e *Emulator) deliver(ep endpoint, id, typ, ref, status string, payload []byte) {
	wait := eventBackoff
	for try := 1; try <= eventTries; try++ {
		cb := emu.Callback{Kind: "stripe", URL: ep.URL, Ref: ref, Event: id + " " + typ, Status: status, Try: try}
		cb.Answer, cb.Error = postEvent(ep, payload)
		e.Ledger.RecordCallback(cb)
		if cb.Answer >= 200 && cb.Answer < 300 {
			return
		}
		time.Sleep(wait)
		wait *= 2
	}
}

func postEvent(ep endpoint, payload []byte) (int, string) {
	req, err := http.NewRequest(http.MethodPost, ep.URL, bytes.NewReader(payload))
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Content-Type", "application/json; charset=utf-8")
	req.Header.Set("User-Agent", "Stripe/1.0 (+https://stripe.com/docs/webhooks)")
	req.Header.Set("Stripe-Signature", Signature(ep.Secret, time.Now(), payload))
	resp, err := eventClient.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, ""
}

// Signature is the Stripe-Signature header of payload sent at t.
func Signature(secret string, t time.Time, payload []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	mac := hmac.New(sha256.New, []byte(secret))
	mac.Write([]byte(ts))
	mac.Write([]byte("."))
	mac.Write(payload)
	return fmt.Sprintf("t=%s,v1=%s", ts, hex.EncodeToString(mac.Sum(nil)))
}
