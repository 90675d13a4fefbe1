package effectdtype

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Duration is a time.Duration written as "30s" or "10m" in YAML and JSON.
type Duration time.Duration

// D returns d as a time.Duration.
func (d Duration) D() time.Duration { return time.Duration(d) }

// String formats d like time.Duration.
func (d Duration) String() string { return time.Duration(d).String() }

// Short writes d as a person does: 1h rather than 1h0m0s, 1h30m rather than
// 1h30m0s. time.ParseDuration reads it back.
func (d Duration) Short() string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

// MarshalJSON writes d as a string such as "1m30s".
func (d Duration) MarshalJSON() ([]byte, error) { return json.Marshal(d.String()) }

// UnmarshalJSON reads a duration string; a bare number is refused as ambiguous.
func (d *Duration) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return fmt.Errorf("want a duration string such as \"30s\", got %s", quoteShort(string(b)))
	}
	return d.parse(s)
}

// UnmarshalYAML reads a duration string such as "30s". It is the form of
// yaml.v3's Unmarshaler that takes a decoding function rather than a
// yaml.Node, so that this package imports no YAML library; the caller
// (cmd/effectd's configuration) names the key and its line.
func (d *Duration) UnmarshalYAML(unmarshal func(any) error) error {
	var s string
	if err := unmarshal(&s); err != nil {
		return errors.New(`want a duration such as "30s"`)
	}
	return d.parse(s)
}

// MarshalYAML writes d as a string.
func (d Duration) MarshalYAML() (any, error) { return d.String(), nil }

func (d *Duration) parse(s string) error {
	if s == "0" {
		*d = 0
		return nil
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return fmt.Errorf("want a duration such as \"30s\", got %s", quoteShort(s))
	}
	*d = Duration(v)
	return nil
}

// MaxPollDelays is how many delays delivery_poll may list.
const MaxPollDelays = 8

// PollDelays are the delays after SENT at which a delivery is polled, written
// as a list of durations (["1m", "10m"]). An array, not a slice, so that a
// Policy stays comparable; unused entries are zero.
type PollDelays [MaxPollDelays]Duration

// List returns the delays in use.
func (p PollDelays) List() []Duration {
	n := 0
	for n < len(p) && p[n] > 0 {
		n++
	}
	return p[:n]
}

func (p *PollDelays) set(ds []Duration) error {
	if len(ds) > MaxPollDelays {
		return fmt.Errorf("at most %d delays, got %d", MaxPollDelays, len(ds))
	}
	*p = PollDelays{}
	for i, d := range ds {
		if d <= 0 {
			return fmt.Errorf("delay %d: must be positive, got %s", i+1, d)
		}
		if i > 0 && d <= ds[i-1] {
			return fmt.Errorf("delay %d: must be longer than the one before (%s), got %s", i+1, ds[i-1], d)
		}
		p[i] = d
	}
	return nil
}

// MarshalJSON writes the delays in use as a list.
func (p PollDelays) MarshalJSON() ([]byte, error) { return json.Marshal(p.List()) }

// UnmarshalJSON reads a list of increasing positive durations.
func (p *PollDelays) UnmarshalJSON(b []byte) error {
	var ds []Duration
	if err := json.Unmarshal(b, &ds); err != nil {
		return fmt.Errorf("want a list of durations such as [\"1m\", \"10m\"]: %w", err)
	}
	return p.set(ds)
}

// UnmarshalYAML reads a list of increasing positive durations, with a
// decoding function as Duration's does.
func (p *PollDelays) UnmarshalYAML(unmarshal func(any) error) error {
	var texts []string
	if err := unmarshal(&texts); err != nil {
		return errors.New(`want a list of durations such as ["1m", "10m"]`)
	}
	ds := make([]Duration, len(texts))
	for i, s := range texts {
		if err := ds[i].parse(s); err != nil {
			return fmt.Errorf("delay %d: %w", i+1, err)
		}
	}
	return p.set(ds)
}

// MarshalYAML writes the delays in use as a list.
func (p PollDelays) MarshalYAML() (any, error) { return p.List(), nil }
