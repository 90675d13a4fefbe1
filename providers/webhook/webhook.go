package webhook

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptrace"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	standardwebhooks "github.com/standard-webhooks/standard-webhooks/libraries/go"

	"github.com/effectd/effectd/providers/effect"
)

// DefaultTimeout bounds one delivery when Config.Timeout is zero.
const DefaultTimeout = 10 * time.Second

// maxRefLen is the longest receiver reference accepted; a longer one is ignored.
const maxRefLen = 255

// Config configures a Provider.
type Config struct {
	URL        string        // absolute http or https URL the webhooks are POSTed to
	Secret     string        // Standard Webhooks secret, "whsec_<base64>"
	Timeout    time.Duration // bound of one delivery; 0 means DefaultTimeout
	HTTPClient *http.Client  // nil means a client on http.DefaultTransport; redirects are never followed
}

// Provider delivers signed webhooks to one URL. It is safe for concurrent use.
type Provider struct {
	url     string
	target  string // url without query, for error messages
	signer  *standardwebhooks.Webhook
	timeout time.Duration
	client  *http.Client
	now     func() time.Time
}

// New validates cfg and returns a Provider.
func New(cfg Config) (*Provider, error) {
	u, err := url.Parse(cfg.URL)
	switch {
	case cfg.URL == "":
		return nil, errors.New("webhook.url: required")
	case err != nil:
		return nil, fmt.Errorf("webhook.url: %w", err)
	case u.Scheme != "http" && u.Scheme != "https" || u.Host == "":
		return nil, fmt.Errorf("webhook.url: %q is not an absolute http or https URL", cfg.URL)
	}
	if cfg.Secret == "" {
		return nil, errors.New("webhook.secret: required")
	}
	secret, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(cfg.Secret, "whsec_"))
	if err != nil || len(secret) == 0 {
		// Say nothing of the value: it is a secret.
		return nil, errors.New("webhook.secret: not a Standard Webhooks secret (whsec_ followed by non-empty base64)")
	}
	signer, err := standardwebhooks.NewWebhookRaw(secret)
	if err != nil {
		return nil, fmt.Errorf("webhook.secret: %w", err)
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("webhook.timeout: %s is negative", cfg.Timeout)
	}
	client := &http.Client{}
	if cfg.HTTPClient != nil {
		c := *cfg.HTTPClient
		client = &c
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	target := *u
	target.RawQuery, target.Fragment, target.User = "", "", nil
	return &Provider{
		url:     cfg.URL,
		target:  target.String(),
		signer:  signer,
		timeout: cmp.Or(cfg.Timeout, DefaultTimeout),
		client:  client,
		now:     time.Now,
	}, nil
}

// Idempotent reports that deliveries are deduplicated by the receiver through
// webhook-id, so a delivery that may have been sent is safely repeated.
func (p *Provider) Idempotent() bool { return true }

// Write progress of one delivery, as seen through httptrace.
const (
	stateIdle    int32 = iota // no connection yet: nothing can have been sent
	stateWriting              // a connection was obtained: the request may be on its way
	stateWritten              // the whole request was written
	stateNotSent              // writing failed: the receiver cannot have a whole request
)

// Send POSTs payload, signed, with key as webhook-id and Idempotency-Key. meta
// is not sent: the payload is the webhook's body, byte for byte. The reference
// returned is the receiver's X-Effect-Ref header, else the "id" string of its
// JSON answer, else key. Errors are *Error.
func (p *Provider) Send(ctx context.Context, key string, payload json.RawMessage, meta map[string]string) (ref string, err error) {
	if key == "" {
		return "", p.fail(0, "", errors.New("empty idempotency key"), effect.Class{})
	}
	if !json.Valid(payload) {
		return "", p.fail(0, "", errors.New("payload is not valid JSON"), effect.Class{})
	}
	now := p.now()
	sig, err := p.signer.Sign(key, now, payload)
	if err != nil {
		return "", p.fail(0, "", fmt.Errorf("sign: %w", err), effect.Class{})
	}

	var state atomic.Int32
	trace := &httptrace.ClientTrace{
		GotConn: func(httptrace.GotConnInfo) { state.Store(stateWriting) },
		WroteRequest: func(info httptrace.WroteRequestInfo) {
			if info.Err != nil {
				state.Store(stateNotSent)
				return
			}
			state.Store(stateWritten)
		},
	}
	ctx, cancel := context.WithTimeout(httptrace.WithClientTrace(ctx, trace), p.timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.url, bytes.NewReader(payload))
	if err != nil {
		return "", p.fail(0, "", fmt.Errorf("build request: %w", err), effect.Class{})
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "effectd")
	req.Header.Set(standardwebhooks.HeaderWebhookID, key)
	req.Header.Set(standardwebhooks.HeaderWebhookTimestamp, strconv.FormatInt(now.Unix(), 10))
	req.Header.Set(standardwebhooks.HeaderWebhookSignature, sig)
	// Not the canonical "Idempotency-Key" on purpose: with the canonical
	// spelling net/http silently replays a written POST when a reused
	// connection dies before the answer, hiding a maybe-sent delivery from the
	// dispatcher, which must see (and record) every attempt.
	req.Header["idempotency-key"] = []string{key}

	resp, err := p.client.Do(req)
	if err != nil {
		switch state.Load() {
		case stateIdle, stateNotSent:
			return "", p.fail(0, "", fmt.Errorf("not sent: %w", err), effect.Class{Retryable: true})
		default: // written, or still being written when the call gave up
			return "", p.fail(0, "", fmt.Errorf("may have been sent, no answer: %w", err), effect.Class{Retryable: true, MaybeSent: true})
		}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10)) // a truncated body still carries the status
	io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))   // let the connection be reused

	switch s := resp.StatusCode; {
	case s >= 200 && s < 300:
		return referenceOf(resp.Header, body, key), nil
	case s == http.StatusRequestTimeout, s == http.StatusTooEarly, s == http.StatusTooManyRequests, s >= 500:
		return "", p.fail(s, excerpt(body), nil, effect.Class{Retryable: true, RetryAfter: effect.ParseRetryAfter(resp.Header.Get("Retry-After"), p.now())})
	case s >= 300 && s < 400:
		return "", p.fail(s, excerpt(body), fmt.Errorf("redirect to %q not followed", resp.Header.Get("Location")), effect.Class{})
	default:
		return "", p.fail(s, excerpt(body), nil, effect.Class{})
	}
}

func (p *Provider) fail(status int, body string, err error, class effect.Class) *Error {
	return &Error{URL: p.target, Status: status, Body: body, Err: err, class: class}
}

// referenceOf picks the receiver's reference for a delivery, falling back to key.
func referenceOf(h http.Header, body []byte, key string) string {
	if ref := h.Get("X-Effect-Ref"); ref != "" && len(ref) <= maxRefLen {
		return ref
	}
	var answer struct {
		ID string `json:"id"`
	}
	if json.Unmarshal(body, &answer) == nil && answer.ID != "" && len(answer.ID) <= maxRefLen {
		return answer.ID
	}
	return key
}

// excerpt shortens a response body to one printable line for error messages.
func excerpt(body []byte) string {
	const limit = 200
	out := make([]rune, 0, limit)
	for _, r := range string(bytes.TrimSpace(body)) {
		if len(out) == limit {
			return string(out) + "…"
		}
		if r < ' ' || r == 0x7f {
			r = ' '
		}
		out = append(out, r)
	}
	return string(out)
}

// Error is a failed delivery, classified by behaviour.
type Error struct {
	URL    string // where the webhook was sent, without query
	Status int    // the receiver's HTTP status; 0 when there was no answer
	Body   string // an excerpt of the receiver's answer
	Err    error  // the underlying cause when there is one (transport error, context error)

	class effect.Class
}

// Error describes the failure with its status and an excerpt of the answer.
func (e *Error) Error() string {
	msg := "webhook: POST " + e.URL
	if e.Status != 0 {
		msg += ": " + strconv.Itoa(e.Status) + " " + http.StatusText(e.Status)
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	if e.Body != "" {
		msg += ": " + strconv.Quote(e.Body)
	}
	return msg
}

// Unwrap returns the underlying cause, such as context.DeadlineExceeded.
func (e *Error) Unwrap() error { return e.Err }

// Retryable reports whether the same delivery may succeed later.
func (e *Error) Retryable() bool { return e.class.Retryable }

// MaybeSent reports whether the receiver may have got the webhook anyway.
func (e *Error) MaybeSent() bool { return e.class.MaybeSent }

// RetryAfter is how long the receiver asked to wait before retrying; 0 if it did not say.
func (e *Error) RetryAfter() time.Duration { return e.class.RetryAfter }
