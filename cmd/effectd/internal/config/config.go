package config

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/effectd/effectd/api/ingress"
	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/tracing"
	"github.com/effectd/effectd/migrations"
	"github.com/effectd/effectd/policy"
	"github.com/effectd/effectd/providers/stripe"
	"github.com/effectd/effectd/providers/twilio"
	"github.com/effectd/effectd/providers/webhook"
)

// File is the YAML document.
type File struct {
	Channels map[string]ChannelSpec `yaml:"channels"`
	Access   AccessSpec             `yaml:"access"`   // see LoadAccess
	Database DatabaseSpec           `yaml:"database"` // see ParseCitus
	Tracing  TracingSpec            `yaml:"tracing"`  // see ParseTraceURL
}

// ChannelSpec is one channel as written in the YAML.
type ChannelSpec struct {
	Provider   string       `yaml:"provider"`
	Twilio     *TwilioSpec  `yaml:"twilio"`
	Stripe     *StripeSpec  `yaml:"stripe"`
	Webhook    *WebhookSpec `yaml:"webhook"`
	Policy     yaml.Node    `yaml:"policy"`
	MaxPayload int          `yaml:"max_payload"`
	Redact     []string     `yaml:"redact"` // top-level payload fields viewers see as "***"
	Notify     *NotifySpec  `yaml:"notify"`
}

// NotifySpec names the webhook channel that tells the producer about a
// channel's outcomes, and which outcomes.
type NotifySpec struct {
	Channel string   `yaml:"channel"`
	On      []string `yaml:"on"`
}

// TwilioSpec configures a twilio channel; credentials come from
// TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN.
type TwilioSpec struct {
	From                string `yaml:"from"`
	MessagingServiceSID string `yaml:"messaging_service_sid"`
	BaseURL             string `yaml:"base_url"`
	StatusCallback      string `yaml:"status_callback"`
}

// StripeSpec configures a stripe channel; the key comes from STRIPE_API_KEY.
// WebhookSecretEnv names the environment variable holding the signing secret
// of the Stripe endpoint that sends this channel's events to the ingress.
type StripeSpec struct {
	BaseURL          string `yaml:"base_url"`
	WebhookSecretEnv string `yaml:"webhook_secret_env"`
}

// WebhookSpec configures a webhook channel; the signing secret comes from the
// environment variable named by SecretEnv.
type WebhookSpec struct {
	URL       string          `yaml:"url"`
	SecretEnv string          `yaml:"secret_env"`
	Timeout   policy.Duration `yaml:"timeout"`
}

var channelName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

// Load reads the YAML at path and builds the channels. getenv supplies secrets.
func Load(path string, getenv func(string) string) ([]dispatcher.Channel, error) {
	return load(path, func(b []byte) ([]dispatcher.Channel, error) { return Parse(b, getenv) })
}

// Loaded is everything one YAML file configures.
type Loaded struct {
	Channels []dispatcher.Channel // as Parse builds them
	Ingress  []ingress.Channel    // as ParseIngress returns them
	Access   Access               // as ParseAccess reads it
	Citus    *migrations.Citus    // as ParseCitus reads it; nil in single-node mode
	Storage  Storage              // database.storage as ParseStorage reads it
	TraceURL string               // tracing.ui_url as ParseTraceURL reads it
}

// LoadAll reads the YAML at path once and parses all of it: the channels, the
// ingress's channels, the access section, database.citus, database.storage
// and tracing, in that order.
func LoadAll(path string, getenv func(string) string) (Loaded, error) {
	return load(path, func(b []byte) (l Loaded, err error) {
		if l.Channels, err = Parse(b, getenv); err != nil {
			return l, err
		}
		if l.Ingress, err = ParseIngress(b, getenv); err != nil {
			return l, err
		}
		if l.Access, err = ParseAccess(b); err != nil {
			return l, err
		}
		if l.Citus, err = ParseCitus(b); err != nil {
			return l, err
		}
		if l.Storage, err = ParseStorage(b); err != nil {
			return l, err
		}
		l.TraceURL, err = ParseTraceURL(b)
		return l, err
	})
}

// load reads the YAML at path and parses it, naming the file in errors.
func load[T any](path string, parse func([]byte) (T, error)) (T, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		var zero T
		return zero, fmt.Errorf("config: %w", err)
	}
	v, err := parse(b)
	if err != nil {
		return v, fmt.Errorf("config %s: %w", path, err)
	}
	return v, nil
}

// Parse reads a YAML document and builds the channels, sorted by name. An
// error names the key, such as channels.sms.policy.lease, and its line.
func Parse(b []byte, getenv func(string) string) ([]dispatcher.Channel, error) {
	var f File
	root, err := decodeDocument(b, &f)
	if err != nil {
		return nil, err
	}
	if len(f.Channels) == 0 {
		return nil, &Error{Path: []string{"channels"}, Line: lineOf(root, []string{"channels"}), Msg: "define at least one channel"}
	}
	names := make([]string, 0, len(f.Channels))
	for name := range f.Channels {
		names = append(names, name)
	}
	sort.Strings(names)
	out := make([]dispatcher.Channel, 0, len(names))
	for _, name := range names {
		c, err := build(name, f.Channels[name], getenv)
		var e *Error
		if errors.As(err, &e) && e.Line == 0 {
			e.Line = lineOf(root, e.Path)
		}
		if err != nil {
			return nil, err
		}
		out = append(out, c)
	}
	if err := checkNotify(f.Channels); err != nil {
		var e *Error
		if errors.As(err, &e) {
			e.Line = lineOf(root, e.Path)
		}
		return nil, err
	}
	return out, nil
}

// checkNotify refuses a notify that names no webhook channel of this file, or
// one with a notify of its own (its notices would notify in turn).
func checkNotify(chans map[string]ChannelSpec) error {
	for name, s := range chans {
		if s.Notify == nil {
			continue
		}
		bad := func(msg string) error {
			return &Error{Path: []string{"channels", name, "notify", "channel"}, Msg: shorten(msg)}
		}
		target, ok := chans[s.Notify.Channel]
		switch {
		case !ok:
			return bad(fmt.Sprintf("no channel %s in this file", quote(s.Notify.Channel)))
		case target.Provider != "webhook":
			return bad(fmt.Sprintf("%s is a %s channel; notices go to a webhook channel", quote(s.Notify.Channel), target.Provider))
		case target.Notify != nil:
			return bad(fmt.Sprintf("%s has a notify of its own; a notify channel must not", quote(s.Notify.Channel)))
		}
	}
	return nil
}

// build makes the channel name of s. Its errors are *Error without a line,
// which Parse finds.
func build(name string, s ChannelSpec, getenv func(string) string) (dispatcher.Channel, error) {
	bad := func(msg string, keys ...string) error {
		return &Error{Path: append([]string{"channels", name}, keys...), Msg: shorten(msg)}
	}
	c := dispatcher.Channel{Name: name, Kind: s.Provider, MaxPayload: s.MaxPayload, Redact: s.Redact}
	if err := checkShape(name, s, bad); err != nil {
		return c, err
	}
	var err error
	if c.Provider, err = newProvider(s, getenv, bad); err != nil {
		return c, err
	}
	if s.Notify != nil {
		c.Notify = &dispatcher.Notify{Channel: s.Notify.Channel, On: s.Notify.On}
		if err := c.Notify.Validate(); err != nil {
			field, msg, _ := strings.Cut(err.Error(), ": ") // notify.on: ...
			return c, bad(msg, strings.Split(field, ".")...)
		}
	}
	if st := deref(s.Stripe); st.WebhookSecretEnv != "" && getenv(st.WebhookSecretEnv) == "" {
		return c, bad(fmt.Sprintf("the environment variable %s is not set", quote(st.WebhookSecretEnv)), "stripe", "webhook_secret_env")
	}
	c.Policy, err = buildPolicy(name, s, bad)
	return c, err
}

// fieldError is the error of one field of a channel, named by its keys.
type fieldError func(msg string, keys ...string) error

// checkShape checks what s says before its provider: the channel's name,
// redact, max_payload, and that only its provider's block is written.
func checkShape(name string, s ChannelSpec, bad fieldError) error {
	if !channelName.MatchString(name) {
		return bad("a channel name is 1-64 letters, digits, '_', '.' or '-'")
	}
	for i, f := range s.Redact {
		if f == "" || len(f) > 255 || slices.Contains(s.Redact[:i], f) {
			return bad(fmt.Sprintf("a payload field name, 1-255 bytes, listed once; got %s", quote(f)), fmt.Sprintf("redact[%d]", i))
		}
	}
	if s.MaxPayload < 0 || s.MaxPayload > 1<<20 {
		return bad("must be between 1 and 1048576 bytes", "max_payload")
	}
	for _, b := range []struct {
		kind    string
		present bool
	}{{"twilio", s.Twilio != nil}, {"stripe", s.Stripe != nil}, {"webhook", s.Webhook != nil}} {
		if b.present && b.kind != s.Provider {
			return bad(fmt.Sprintf("this block belongs to provider %s, but the channel's provider is %s", b.kind, quote(s.Provider)), b.kind)
		}
	}
	return nil
}

// newProvider makes the provider s names from its block and the credentials
// in the environment.
func newProvider(s ChannelSpec, getenv func(string) string, bad fieldError) (dispatcher.Provider, error) {
	var p dispatcher.Provider
	var err error
	var where []string // a provider's own error points at its block, if written
	switch s.Provider {
	case "twilio":
		t := deref(s.Twilio)
		if s.Twilio != nil {
			where = []string{"twilio"}
		}
		p, err = twilio.New(twilio.Config{
			AccountSID: getenv("TWILIO_ACCOUNT_SID"), AuthToken: getenv("TWILIO_AUTH_TOKEN"),
			From: t.From, MessagingServiceSID: t.MessagingServiceSID, BaseURL: t.BaseURL, StatusCallback: t.StatusCallback,
			HTTPClient: pooledClient(getenv),
		})
		if err == nil && (getenv("TWILIO_ACCOUNT_SID") == "" || getenv("TWILIO_AUTH_TOKEN") == "") {
			err = errors.New("TWILIO_ACCOUNT_SID and TWILIO_AUTH_TOKEN must be set in the environment")
		}
	case "stripe":
		st := deref(s.Stripe)
		if s.Stripe != nil {
			where = []string{"stripe"}
		}
		if getenv("STRIPE_API_KEY") == "" {
			err = errors.New("STRIPE_API_KEY must be set in the environment")
		} else {
			p, err = stripe.New(stripe.Config{APIKey: getenv("STRIPE_API_KEY"), BaseURL: st.BaseURL, HTTPClient: pooledClient(getenv)})
		}
	case "webhook":
		w := deref(s.Webhook)
		switch {
		case w.URL == "":
			return nil, bad("is required", "webhook", "url")
		case w.SecretEnv == "":
			return nil, bad("name the environment variable that holds the signing secret", "webhook", "secret_env")
		case getenv(w.SecretEnv) == "":
			return nil, bad(fmt.Sprintf("the environment variable %s is not set", quote(w.SecretEnv)), "webhook", "secret_env")
		case w.Timeout < 0:
			return nil, bad("must not be negative", "webhook", "timeout")
		default:
			where = []string{"webhook"}
			p, err = webhook.New(webhook.Config{URL: w.URL, Secret: getenv(w.SecretEnv), Timeout: time.Duration(w.Timeout), HTTPClient: pooledClient(getenv)})
		}
	case "":
		return nil, bad("is required (twilio, stripe or webhook)", "provider")
	default:
		return nil, bad(fmt.Sprintf("unknown provider %s (want twilio, stripe or webhook)", quote(s.Provider)), "provider")
	}
	if err != nil {
		return nil, bad(err.Error(), where...)
	}
	return p, nil
}

// buildPolicy is the provider's default policy with s's policy block merged
// in, validated for the provider.
func buildPolicy(name string, s ChannelSpec, bad fieldError) (policy.Policy, error) {
	pol := policy.Default(s.Provider)
	if !s.Policy.IsZero() {
		if err := decode([]string{"channels", name, "policy"}, &s.Policy, reflect.ValueOf(&pol).Elem()); err != nil {
			return pol, err
		}
	}
	if err := pol.ValidateFor(s.Provider); err != nil {
		var in *policy.Error
		if errors.As(err, &in) && in.Field != "" {
			return pol, bad(in.Msg, strings.Split(in.Field, ".")...)
		}
		return pol, bad(err.Error(), "policy")
	}
	return pol, nil
}

// yamlMessage returns a yaml.v3 error on one line: it lists type errors on
// indented lines of their own.
func yamlMessage(err error) string {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	return strings.ReplaceAll(strings.TrimPrefix(msg, "unmarshal errors:\n  "), "\n  ", "; ")
}

// pooledClient is a channel's HTTP client. net/http's default keeps only two
// idle connections per host, so a channel with many calls in flight would dial
// a new connection for most calls; this one keeps as many as a channel may use.
// With tracing on (the OTEL_* variables), each request is a client span.
func pooledClient(getenv func(string) string) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 0 // no limit across hosts
	t.MaxIdleConnsPerHost = 1024
	if tracing.Enabled(getenv) {
		return &http.Client{Transport: tracing.Transport(t)}
	}
	return &http.Client{Transport: t}
}

func deref[T any](p *T) T {
	if p == nil {
		var zero T
		return zero
	}
	return *p
}
