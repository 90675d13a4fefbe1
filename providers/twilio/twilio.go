package twilio

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/twilio/twilio-go/client"
	openapi "github.com/twilio/twilio-go/rest/api/v2010"

	"github.com/effectd/effectd/providers/effect"
	"github.com/effectd/effectd/providers/fieldrule"
)

// Lookup bounds.
const (
	// lookupSkew widens the lookup window before the claim, for clock skew
	// between us and Twilio and for dates Twilio rounds down to the second.
	lookupSkew = 2 * time.Minute
	// lookupLimit bounds each of the two listings Lookup makes.
	lookupLimit = 50
)

// defaultTimeout bounds one Send or one Lookup when Config.Timeout is zero.
const defaultTimeout = 10 * time.Second

var accountSIDPattern = regexp.MustCompile(`^AC[0-9a-fA-F]{32}$`)

// ErrAmbiguous is returned by Lookup when several messages match: it cannot
// tell which one, if any, the in-doubt attempt sent.
var ErrAmbiguous = errors.New("ambiguous: several messages match")

// Config configures a Provider for one channel.
type Config struct {
	AccountSID          string        // "AC" + 32 hex digits
	AuthToken           string        // the account's auth token
	From                string        // default sender, used when the payload has no "from"
	MessagingServiceSID string        // "MG…", used when neither the payload nor From names a sender
	BaseURL             string        // "" = the real API; else scheme and host (and path prefix) replacing https://api.twilio.com
	StatusCallback      string        // optional URL; the intent id and event id are appended as effectd_intent_id and effectd_event_id
	HTTPClient          *http.Client  // its Transport carries the requests (default http.DefaultTransport)
	Timeout             time.Duration // bounds one Send or one Lookup, all requests included (default 10s)
}

// Provider sends SMS through Twilio. It is safe for concurrent use.
type Provider struct {
	cfg       Config
	transport http.RoundTripper
	baseURL   *url.URL // nil = the real API
	callback  *url.URL // nil = no status callback
	timeout   time.Duration
}

// New checks cfg and returns a Provider.
func New(cfg Config) (*Provider, error) {
	p := &Provider{cfg: cfg, transport: http.DefaultTransport, timeout: cmp.Or(cfg.Timeout, defaultTimeout)}
	switch {
	case cfg.AccountSID == "":
		return nil, errors.New("twilio.account_sid: required (TWILIO_ACCOUNT_SID)")
	case !accountSIDPattern.MatchString(cfg.AccountSID):
		return nil, errors.New("twilio.account_sid: must be AC followed by 32 hex digits")
	case cfg.AuthToken == "":
		return nil, errors.New("twilio.auth_token: required (TWILIO_AUTH_TOKEN)")
	case !isAlphanumeric(cfg.AuthToken):
		return nil, errors.New("twilio.auth_token: must be letters and digits only")
	case cfg.From == "" && cfg.MessagingServiceSID == "":
		return nil, errors.New("twilio.from: required unless twilio.messaging_service_sid is set")
	case cfg.MessagingServiceSID != "" && !strings.HasPrefix(cfg.MessagingServiceSID, "MG"):
		return nil, errors.New("twilio.messaging_service_sid: must start with MG")
	case cfg.Timeout < 0:
		return nil, errors.New("twilio.timeout: must not be negative")
	}
	if cfg.BaseURL != "" {
		u, err := parseHTTPURL(cfg.BaseURL)
		if err != nil {
			return nil, fmt.Errorf("twilio.base_url: %w", err)
		}
		p.baseURL = u
	}
	if cfg.StatusCallback != "" {
		u, err := parseHTTPURL(cfg.StatusCallback)
		if err != nil {
			return nil, fmt.Errorf("twilio.status_callback: %w", err)
		}
		p.callback = u
	}
	if cfg.HTTPClient != nil && cfg.HTTPClient.Transport != nil {
		p.transport = cfg.HTTPClient.Transport
	}
	return p, nil
}

// message is the payload of an SMS intent, with its sender resolved.
type message struct {
	To   string
	Body string
	From string
}

// The shape of a payload, the same rules as effectd.validate_payload's.
var (
	e164     = regexp.MustCompile(`^\+[1-9][0-9]{6,14}$`)
	sender   = regexp.MustCompile(`^(\+[1-9][0-9]{6,14}|[0-9]{5,6}|[A-Za-z][A-Za-z0-9 ]{0,10})$`)
	nonEmpty = regexp.MustCompile(`(?s)^.`)
)

// maxBody is the longest body Twilio takes, in characters.
const maxBody = 1600

// Validate reports whether payload is an SMS this provider can send, naming
// the faulty field.
func (p *Provider) Validate(payload json.RawMessage) error {
	if _, err := p.message(payload); err != nil {
		return fmt.Errorf("twilio: %w", err)
	}
	return nil
}

// message checks payload against the SMS shape, decodes it and resolves its
// sender: the payload's from, else the channel's From; empty From means the
// messaging service. JSON null counts as an absent field.
func (p *Provider) message(payload json.RawMessage) (m message, err error) {
	o, err := fieldrule.Decode(payload)
	if err != nil {
		return m, err
	}
	if err := o.OnlyKeys("an SMS", "to", "body", "from"); err != nil {
		return m, err
	}
	if m.To, err = o.String("to", true, e164, "a phone number in E.164 form (+ and 7 to 15 digits)"); err != nil {
		return m, err
	}
	if m.Body, err = o.String("body", true, nonEmpty, "a non-empty string"); err != nil {
		return m, err
	}
	if m.From, err = o.String("from", false, sender, "a phone number in E.164 form, a short code or an alphanumeric sender id"); err != nil {
		return m, err
	}
	if utf8.RuneCountInString(m.Body) > maxBody {
		return m, fmt.Errorf("payload.body: is longer than %d characters", maxBody)
	}
	m.From = cmp.Or(m.From, p.cfg.From)
	return m, nil
}

// Send creates the message and returns its SID ("SM…"). Twilio has no
// idempotency key, so key is not sent; an error that MaybeSent is settled by
// Lookup, never by repeating the call.
func (p *Provider) Send(ctx context.Context, key string, payload json.RawMessage, meta map[string]string) (string, error) {
	m, err := p.message(payload)
	if err != nil {
		return "", &Error{Op: "send", Message: err.Error(), err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	api, tr := p.api(ctx)

	params := &openapi.CreateMessageParams{}
	params.SetTo(m.To).SetBody(m.Body)
	if m.From != "" {
		params.SetFrom(m.From)
	} else {
		params.SetMessagingServiceSid(p.cfg.MessagingServiceSID)
	}
	if cb := p.statusCallback(meta); cb != "" {
		params.SetStatusCallback(cb)
	}
	msg, err := api.CreateMessage(params)
	if err != nil {
		return "", classify("send", m.To, err, tr)
	}
	if msg.Sid == nil || *msg.Sid == "" {
		// Twilio accepted something but did not say what: look it up.
		return "", &Error{Op: "send", To: m.To, Status: tr.status(), Message: "answer without a message sid", class: effect.Class{Retryable: true, MaybeSent: true}}
	}
	return *msg.Sid, nil
}

// statusCallback returns the configured callback URL carrying the intent id
// and the producer's event id: the callback names its intent by both, since
// an intent id is handed out again after a failover that lost its enqueue.
func (p *Provider) statusCallback(meta map[string]string) string {
	if p.callback == nil {
		return ""
	}
	u := *p.callback
	q := u.Query()
	for _, k := range []string{effect.MetaIntentID, effect.MetaEventID} {
		if v := meta[k]; v != "" {
			q.Set(k, v)
			u.RawQuery = q.Encode()
		}
	}
	return u.String()
}

// Lookup tells whether an SMS sent from claimed on took effect. It lists the
// messages to the same number from the same sender (or messaging service) sent
// since shortly before the claim, and, because date_sent stays empty while a
// message is queued, also the newest messages without a date filter. A single
// message with the same body created since shortly before the claim is found;
// none is absent; several is ErrAmbiguous. key and created are not needed.
func (p *Provider) Lookup(ctx context.Context, key string, payload json.RawMessage, meta map[string]string, created, claimed time.Time) (string, bool, error) {
	m, err := p.message(payload)
	if err != nil {
		return "", false, &Error{Op: "lookup", Message: err.Error(), err: err}
	}
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	since := claimed.Add(-lookupSkew).UTC()
	matches, complete, err := p.sentSince(ctx, "lookup", m, since)
	switch {
	case err != nil:
		return "", false, err
	case len(matches) == 1:
		return matches[0].Ref, true, nil
	case len(matches) > 1:
		sids := make([]string, len(matches))
		for i, o := range matches {
			sids[i] = o.Ref
		}
		return "", false, fmt.Errorf("twilio: lookup to %s: %w: %s", maskNumber(m.To), ErrAmbiguous, strings.Join(sids, ", "))
	case !complete:
		// A listing was cut at its limit within the window: our message
		// may be beyond it, so its absence is not proven.
		return "", false, fmt.Errorf("twilio: lookup to %s: cannot tell: more than %d messages since %s", maskNumber(m.To), lookupLimit, since.Format(time.RFC3339))
	}
	return "", false, nil
}

// sentSince returns the messages of m's sender to m's recipient with m's body
// created at or after since: those Twilio dates as sent since then, and,
// because date_sent stays empty while a message is queued, the newest
// lookupLimit without a date filter. complete is false when a listing was cut
// at its limit within the span, so that a message may lie beyond it.
func (p *Provider) sentSince(ctx context.Context, op string, m message, since time.Time) (matches []effect.Object, complete bool, err error) {
	api, tr := p.api(ctx)
	params := func() *openapi.ListMessageParams {
		lp := &openapi.ListMessageParams{}
		lp.SetTo(m.To).SetLimit(lookupLimit)
		if m.From != "" {
			lp.SetFrom(m.From)
		}
		return lp
	}
	sent, err := api.ListMessage(params().SetDateSentAfter(since))
	if err != nil {
		return nil, false, classify(op, m.To, err, tr)
	}
	newest, err := api.ListMessage(params())
	if err != nil {
		return nil, false, classify(op, m.To, err, tr)
	}
	seen := map[string]bool{}
	for _, msg := range append(sent, newest...) {
		sid := deref(msg.Sid)
		if sid == "" || seen[sid] || deref(msg.Body) != m.Body {
			continue
		}
		seen[sid] = true
		if m.From == "" && deref(msg.MessagingServiceSid) != p.cfg.MessagingServiceSID {
			continue
		}
		o, err := object(msg)
		if err != nil {
			return nil, false, fmt.Errorf("twilio: %s to %s: %w", op, maskNumber(m.To), err)
		}
		if !o.Created.Before(since) {
			matches = append(matches, o)
		}
	}
	complete = len(sent) < lookupLimit && (len(newest) < lookupLimit || createdBefore(newest[len(newest)-1], since))
	return matches, complete, nil
}

// createdBefore reports whether msg was created before t; an unreadable date
// counts as not before.
func createdBefore(msg openapi.ApiV2010Message, t time.Time) bool {
	at, err := time.Parse(time.RFC1123Z, deref(msg.DateCreated))
	return err == nil && at.Before(t)
}

// api returns a Messages client whose requests carry ctx, through a transport
// of their own that also records what classify needs. twilio-go v1.31 builds
// every request with context.Background(), so the context rides on the
// transport; the client is cheap to build per call.
func (p *Provider) api(ctx context.Context) (*openapi.ApiService, *callTransport) {
	tr := &callTransport{ctx: ctx, next: p.transport, baseURL: p.baseURL}
	c := &client.Client{
		Credentials: client.NewCredentials(p.cfg.AccountSID, p.cfg.AuthToken),
		HTTPClient: &http.Client{
			Transport: tr,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse // as twilio-go's default client
			},
		},
	}
	c.SetAccountSid(p.cfg.AccountSID)
	return openapi.NewApiServiceWithClient(c), tr
}

func parseHTTPURL(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil {
		return nil, err
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%q is not an absolute http(s) URL", s)
	}
	return u, nil
}

func isAlphanumeric(s string) bool {
	for _, r := range s {
		if !('a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9') {
			return false
		}
	}
	return true
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}
