package stripe

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"strings"
	"time"

	stripeapi "github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/client"
)

// Meta keys stamped on every created object; the dispatcher supplies them.
const (
	metaEventID  = "effectd_event_id"
	metaIntentID = "effectd_intent_id"
)

// Config configures a Provider.
type Config struct {
	APIKey     string        // secret key (STRIPE_API_KEY)
	BaseURL    string        // "" = the real API
	HTTPClient *http.Client  // nil = a default client
	Timeout    time.Duration // per call; 0 = 30s
}

// Provider sends Stripe effects with the intent's idempotency key.
type Provider struct {
	api     *client.API
	timeout time.Duration
	now     func() time.Time
}

// New returns a Provider for cfg.
func New(cfg Config) (*Provider, error) {
	if cfg.APIKey == "" {
		return nil, errors.New("stripe.api_key: empty (set STRIPE_API_KEY)")
	}
	if strings.ContainsAny(cfg.APIKey, " \t\r\n") {
		return nil, errors.New("stripe.api_key: contains whitespace")
	}
	if cfg.Timeout < 0 {
		return nil, fmt.Errorf("stripe.timeout: %v is negative", cfg.Timeout)
	}
	if cfg.BaseURL != "" && !strings.HasPrefix(cfg.BaseURL, "http://") && !strings.HasPrefix(cfg.BaseURL, "https://") {
		return nil, fmt.Errorf("stripe.base_url: %q is not an http(s) URL", cfg.BaseURL)
	}
	hc := &http.Client{}
	if cfg.HTTPClient != nil {
		c := *cfg.HTTPClient
		hc = &c
	}
	hc.Transport = recorder{next: cmp.Or[http.RoundTripper](hc.Transport, http.DefaultTransport)}
	bc := &stripeapi.BackendConfig{
		HTTPClient:        hc,
		MaxNetworkRetries: stripeapi.Int64(0), // effectd owns retries
		LeveledLogger:     &stripeapi.LeveledLogger{Level: stripeapi.LevelNull},
	}
	if cfg.BaseURL != "" {
		bc.URL = stripeapi.String(strings.TrimSuffix(cfg.BaseURL, "/"))
	}
	backends := &stripeapi.Backends{
		API:     stripeapi.GetBackendWithConfig(stripeapi.APIBackend, bc),
		Connect: stripeapi.GetBackendWithConfig(stripeapi.ConnectBackend, bc),
		Uploads: stripeapi.GetBackendWithConfig(stripeapi.UploadsBackend, bc),
	}
	return &Provider{
		api:     client.New(cfg.APIKey, backends),
		timeout: cmp.Or(cfg.Timeout, 30*time.Second),
		now:     time.Now,
	}, nil
}

// Idempotent reports that Stripe deduplicates calls by idempotency key.
func (p *Provider) Idempotent() bool { return true }

// payload is what an intent asks Stripe to do.
type payload struct {
	Type string `json:"type"` // refund | payment_intent | transfer

	Amount   *int64 `json:"amount"`
	Currency string `json:"currency"`

	PaymentIntent string `json:"payment_intent"` // refund
	Charge        string `json:"charge"`         // refund
	Reason        string `json:"reason"`         // refund

	Customer      string `json:"customer"`       // payment_intent
	PaymentMethod string `json:"payment_method"` // payment_intent
	Confirm       bool   `json:"confirm"`        // payment_intent
	OffSession    bool   `json:"off_session"`    // payment_intent

	Destination string `json:"destination"` // transfer
}

// Validate reports why payload cannot be sent, naming the field, or nil.
func (p *Provider) Validate(raw json.RawMessage) error {
	_, err := parsePayload(raw)
	return err
}

func parsePayload(raw json.RawMessage) (payload, error) {
	var pl payload
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&pl); err != nil {
		return pl, fmt.Errorf("payload: %w", err)
	}
	if pl.Amount != nil && *pl.Amount <= 0 {
		return pl, fmt.Errorf("payload.amount: %d is not a positive integer", *pl.Amount)
	}
	switch pl.Type {
	case "refund":
		if pl.PaymentIntent == "" && pl.Charge == "" {
			return pl, errors.New("payload.payment_intent: a refund needs payment_intent or charge")
		}
		switch pl.Reason {
		case "", "duplicate", "fraudulent", "requested_by_customer":
		default:
			return pl, fmt.Errorf("payload.reason: %q is not duplicate, fraudulent or requested_by_customer", pl.Reason)
		}
	case "payment_intent", "transfer":
		if pl.Amount == nil {
			return pl, fmt.Errorf("payload.amount: a %s needs an amount", pl.Type)
		}
		if len(pl.Currency) != 3 {
			return pl, fmt.Errorf("payload.currency: a %s needs a three-letter currency, got %q", pl.Type, pl.Currency)
		}
		if pl.Type == "transfer" && pl.Destination == "" {
			return pl, errors.New("payload.destination: a transfer needs a destination account")
		}
	case "":
		return pl, errors.New("payload.type: missing (refund, payment_intent or transfer)")
	default:
		return pl, fmt.Errorf("payload.type: unknown %q (refund, payment_intent or transfer)", pl.Type)
	}
	return pl, nil
}

// Send creates the object the payload describes, with key as Stripe's
// Idempotency-Key and meta as its metadata, and returns the object's id.
func (p *Provider) Send(ctx context.Context, key string, raw json.RawMessage, meta map[string]string) (string, error) {
	pl, err := parsePayload(raw)
	if err != nil {
		return "", permanent("stripe send", "%v", err)
	}
	op := "stripe create " + pl.Type
	if key == "" {
		return "", permanent(op, "empty idempotency key")
	}
	if pl.Type == "transfer" && meta[metaEventID] == "" {
		return "", permanent(op, "meta %s is empty: it is the transfer_group", metaEventID)
	}
	return p.call(ctx, op, func(ctx context.Context) (string, error) { return p.create(ctx, key, pl, meta) })
}

// create issues the POST. Params are built only from payload and meta, so
// every attempt sends identical parameters and Stripe's key replay works.
func (p *Provider) create(ctx context.Context, key string, pl payload, meta map[string]string) (string, error) {
	params := stripeapi.Params{Context: ctx, IdempotencyKey: stripeapi.String(key)}
	for k, v := range meta {
		params.AddMetadata(k, v)
	}
	str := func(s string) *string {
		if s == "" {
			return nil
		}
		return stripeapi.String(s)
	}
	switch pl.Type {
	case "refund":
		r, err := p.api.Refunds.New(&stripeapi.RefundParams{
			Params: params, PaymentIntent: str(pl.PaymentIntent), Charge: str(pl.Charge),
			Amount: pl.Amount, Reason: str(pl.Reason),
		})
		if err != nil {
			return "", err
		}
		return r.ID, nil
	case "payment_intent":
		ps := &stripeapi.PaymentIntentParams{
			Params: params, Amount: pl.Amount, Currency: stripeapi.String(strings.ToLower(pl.Currency)),
			Customer: str(pl.Customer), PaymentMethod: str(pl.PaymentMethod),
		}
		if pl.Confirm {
			ps.Confirm = stripeapi.Bool(true)
		}
		if pl.OffSession {
			ps.OffSession = stripeapi.Bool(true)
		}
		pi, err := p.api.PaymentIntents.New(ps)
		if err != nil {
			return "", err
		}
		return pi.ID, nil
	default: // transfer
		tr, err := p.api.Transfers.New(&stripeapi.TransferParams{
			Params: params, Amount: pl.Amount, Currency: stripeapi.String(strings.ToLower(pl.Currency)),
			Destination: stripeapi.String(pl.Destination), TransferGroup: stripeapi.String(meta[metaEventID]),
		})
		if err != nil {
			return "", err
		}
		return tr.ID, nil
	}
}

// call runs f under traced and classifies its error as op.
func (p *Provider) call(ctx context.Context, op string, f func(ctx context.Context) (string, error)) (string, error) {
	ctx, x, cancel := p.traced(ctx)
	defer cancel()
	ref, err := f(ctx)
	if err != nil {
		return "", classify(op, err, x)
	}
	return ref, nil
}

// traced returns ctx with the per-call timeout and an exchange in which the
// transport records what it saw of the calls made with it.
func (p *Provider) traced(ctx context.Context) (context.Context, *exchange, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, p.timeout)
	x := &exchange{}
	ctx = context.WithValue(ctx, exchangeKey{}, x)
	ctx = httptrace.WithClientTrace(ctx, &httptrace.ClientTrace{
		WroteRequest: func(i httptrace.WroteRequestInfo) {
			if i.Err == nil {
				x.wrote.Store(true)
			}
		},
	})
	return ctx, x, cancel
}
