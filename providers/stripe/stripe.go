package stripe

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptrace"
	"regexp"
	"strings"
	"time"

	stripeapi "github.com/stripe/stripe-go/v76"
	"github.com/stripe/stripe-go/v76/client"

	"github.com/effectd/effectd/providers/effect"
	"github.com/effectd/effectd/providers/fieldrule"
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
	Type string // refund | payment_intent | transfer

	Amount   *int64
	Currency string // payment_intent, transfer

	PaymentIntent string // refund
	Charge        string // refund
	Reason        string // refund

	Customer      string // payment_intent
	PaymentMethod string // payment_intent
	Confirm       bool   // payment_intent
	OffSession    bool   // payment_intent

	Destination string // transfer
}

// Validate reports why payload cannot be sent, naming the field, or nil.
func (p *Provider) Validate(raw json.RawMessage) error {
	_, err := parsePayload(raw)
	return err
}

// The shape of a payload, the same rules as effectd.validate_payload's.
var (
	stripeID     = regexp.MustCompile(`^[A-Za-z0-9_]{1,255}$`)
	currencyCode = regexp.MustCompile(`^[A-Za-z]{3}$`)
	refundReason = regexp.MustCompile(`^(duplicate|fraudulent|requested_by_customer)$`)
	nonEmpty     = regexp.MustCompile(`(?s)^.`)
)

const (
	stripeIDWhat = "a Stripe id (letters, digits and _)"
	currencyWhat = "a three-letter ISO currency code"
)

// parsePayload checks raw against the payload shape of its type and decodes it.
// JSON null counts as an absent field.
func parsePayload(raw json.RawMessage) (pl payload, err error) {
	o, err := fieldrule.Decode(raw)
	if err != nil {
		return pl, err
	}
	if pl.Type, err = o.String("type", true, nonEmpty, "refund, payment_intent or transfer"); err != nil {
		return pl, err
	}
	set := func(dst *string, field string, required bool, re *regexp.Regexp, what string) {
		if err == nil {
			*dst, err = o.String(field, required, re, what)
		}
	}
	switch pl.Type {
	case "refund":
		if err = o.OnlyKeys("a refund", "type", "payment_intent", "charge", "amount", "reason"); err != nil {
			return pl, err
		}
		if !o.Has("payment_intent") && !o.Has("charge") {
			return pl, errors.New("payload.payment_intent: a refund needs payment_intent or charge")
		}
		set(&pl.PaymentIntent, "payment_intent", false, stripeID, stripeIDWhat)
		set(&pl.Charge, "charge", false, stripeID, stripeIDWhat)
		if err == nil {
			pl.Amount, err = o.PositiveInt("amount", false)
		}
		set(&pl.Reason, "reason", false, refundReason, "duplicate, fraudulent or requested_by_customer")
	case "payment_intent":
		if err = o.OnlyKeys("a payment_intent", "type", "amount", "currency", "customer", "payment_method", "confirm", "off_session"); err != nil {
			return pl, err
		}
		if pl.Amount, err = o.PositiveInt("amount", true); err != nil {
			return pl, err
		}
		set(&pl.Currency, "currency", true, currencyCode, currencyWhat)
		set(&pl.Customer, "customer", false, stripeID, stripeIDWhat)
		set(&pl.PaymentMethod, "payment_method", false, stripeID, stripeIDWhat)
		if err == nil {
			pl.Confirm, err = o.Bool("confirm")
		}
		if err == nil {
			pl.OffSession, err = o.Bool("off_session")
		}
	case "transfer":
		if err = o.OnlyKeys("a transfer", "type", "amount", "currency", "destination"); err != nil {
			return pl, err
		}
		if pl.Amount, err = o.PositiveInt("amount", true); err != nil {
			return pl, err
		}
		set(&pl.Currency, "currency", true, currencyCode, currencyWhat)
		set(&pl.Destination, "destination", true, stripeID, stripeIDWhat)
	default:
		return pl, fmt.Errorf("payload.type: must be refund, payment_intent or transfer, got %q", fieldrule.Truncate(pl.Type, 40))
	}
	return pl, err
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
	if pl.Type == "transfer" && meta[effect.MetaEventID] == "" {
		return "", permanent(op, "meta %s is empty: it is the transfer_group", effect.MetaEventID)
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
			Destination: stripeapi.String(pl.Destination), TransferGroup: stripeapi.String(meta[effect.MetaEventID]),
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
	return p.tracedFor(ctx, p.timeout)
}

// tracedFor is traced with timeout d.
func (p *Provider) tracedFor(ctx context.Context, d time.Duration) (context.Context, *exchange, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(ctx, d)
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
