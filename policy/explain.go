package policy

import (
	"bytes"
	"encoding/json"
	"maps"
	"slices"
)

// Source is where a field of a channel's effective policy comes from.
type Source string

// The sources, in the order Effective layers them.
const (
	FromDefault  Source = "default"  // Default(kind): neither the YAML nor an override changes it
	FromYAML     Source = "YAML"     // the registered policy, from the channel's YAML
	FromOverride Source = "override" // the admin API's override
)

// Field is one leaf of a channel's effective policy.
type Field struct {
	Name   string          // the JSON key, with a dot inside an object: backoff.base
	Value  json.RawMessage // as the effective policy's JSON writes it
	Source Source
}

// Explain returns every leaf of the effective policy of a channel of
// provider kind (see Effective), by name, with where its value comes from: a
// key of the override is the override's; else a value the registered policy
// changes from the default is the YAML's; else it is the default. The
// registered policy is stored whole (dispatcher.Register writes every field),
// so a YAML line that repeats a default cannot be told from no line, and
// shows as the default, which is its value either way.
func Explain(kind string, registered, override []byte) ([]Field, error) {
	eff, err := Effective(kind, registered, override)
	if err != nil {
		return nil, err
	}
	yaml, err := Effective(kind, registered, nil)
	if err != nil {
		return nil, err
	}
	effLeaves, err := leaves(eff)
	if err != nil {
		return nil, err
	}
	yamlLeaves, err := leaves(yaml)
	if err != nil {
		return nil, err
	}
	defLeaves, err := leaves(Default(kind))
	if err != nil {
		return nil, err
	}
	overLeaves := map[string]json.RawMessage{}
	if len(bytes.TrimSpace(override)) > 0 {
		if err := flatten("", override, overLeaves); err != nil {
			return nil, err
		}
	}
	out := make([]Field, 0, len(effLeaves))
	for _, name := range slices.Sorted(maps.Keys(effLeaves)) {
		src := FromDefault
		if _, ok := overLeaves[name]; ok {
			src = FromOverride
		} else if !bytes.Equal(yamlLeaves[name], defLeaves[name]) {
			src = FromYAML
		}
		out = append(out, Field{Name: name, Value: effLeaves[name], Source: src})
	}
	return out, nil
}

// leaves returns p's JSON leaves by dotted name.
func leaves(p Policy) (map[string]json.RawMessage, error) {
	b, err := json.Marshal(p)
	if err != nil {
		return nil, err
	}
	out := map[string]json.RawMessage{}
	return out, flatten("", b, out)
}

// flatten adds the leaves of the JSON object b to out, each named prefix +
// its key, with a dot before the keys of a nested object.
func flatten(prefix string, b []byte, out map[string]json.RawMessage) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	for k, v := range m {
		if v = bytes.TrimSpace(v); len(v) > 0 && v[0] == '{' {
			if err := flatten(prefix+k+".", v, out); err != nil {
				return err
			}
			continue
		}
		out[prefix+k] = v
	}
	return nil
}
