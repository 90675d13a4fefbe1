package config

import (
	"bytes"
	"fmt"
	"sort"

	"gopkg.in/yaml.v3"

	"github.com/effectd/effectd/api/ingress"
)

// ParseIngress returns the channels of a YAML document whose provider events
// the ingress receives, sorted by name: twilio channels with a
// status_callback, stripe channels with a webhook_secret_env. Parse checks
// the rest of the document.
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
