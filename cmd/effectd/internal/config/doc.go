// Package config reads effectd's YAML configuration, a map of channels, and
// builds each channel's provider with secrets taken from the environment.
// Any unknown key, unknown provider, invalid policy value or missing secret is
// refused with a message naming the field. LoadAll reads a file once and
// parses all it configures: the channels, the ingress's channels and the
// access section.
package config
