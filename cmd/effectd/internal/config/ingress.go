package config

import (
	"bytes"
	"fmt"
	"os"
	"sort"

	"gopkg.in/yaml.v3"

	"github.com/effectd/effectd/api/ingress"
)

// LoadIngress reads the YAML at path and returns the channels whose provider
// events the ingress receives: twilio channels with a status_callback, stripe
// channels with a webhook_secret_env. Load checks the rest of the file.
func LoadIngress(path string, getenv func(string) string) ([]ingress.Channel, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config: %w", err)
	}
	chans, err := ParseIngress(b, getenv)
	if err != nil {
		return nil, fmt.Errorf("config %s: %w", path, err)
	}
	return chans, nil
}

// ParseIngress is LoadIngress on a YAML document, sorted by name.
func ParseIngress(b []byte, getenv func(string) string) ([]ingress.Channel, error) {
	var f File
	dec := yaml.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&f); err != nil {
		return nil, fmt.Errorf("%s", yamlMessage(err))
	}
	var out []ingress.Channel
	for name, s := range f.Channels {
		switch {
		case s.Provider == "twilio" && s.Twilio != nil && s.Twilio.StatusCallback != "":
			out = append(out, ingress.Channel{Name: name, Provider: "twilio",
				TwilioAuthToken: getenv("TWILIO_AUTH_TOKEN"), StatusCallback: s.Twilio.StatusCallback})
		case s.Provider == "stripe" && s.Stripe != nil && s.Stripe.WebhookSecretEnv != "":
			secret := getenv(s.Stripe.WebhookSecretEnv)
			if secret == "" {
				return nil, fmt.Errorf("channels.%s.stripe.webhook_secret_env: the environment variable %s is not set", name, s.Stripe.WebhookSecretEnv)
			}
			out = append(out, ingress.Channel{Name: name, Provider: "stripe", StripeSecret: secret})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}
