package policy

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	jsonpatch "github.com/evanphx/json-patch/v5"
)

// Effective is the policy a channel of provider kind runs with: Default(kind),
// then the registered (YAML) policy, then the admin API's override, each a
// JSON object merged by Merge. An empty layer or {} changes nothing. The
// result must pass ValidateFor(kind).
func Effective(kind string, registered, override []byte) (Policy, error) {
	p := Default(kind)
	var err error
	for _, layer := range [][]byte{registered, override} {
		if len(layer) == 0 || string(layer) == "{}" {
			continue
		}
		if p, err = p.Merge(layer); err != nil {
			return p, err
		}
	}
	return p, p.ValidateFor(kind)
}

// ErrUnknownField is wrapped by Patch's error for a top-level key that no
// policy has.
var ErrUnknownField = errors.New("unknown policy field")

// fields are the top-level keys of a policy in JSON.
var fields = func() map[string]bool {
	b, err := json.Marshal(Default(""))
	if err != nil {
		panic(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		panic(err)
	}
	out := make(map[string]bool, len(m))
	for k := range m {
		out[k] = true
	}
	return out
}()

// Patch returns a channel's new run-time override after patch, a JSON merge
// patch (RFC 7396) of the stored override: a key replaces that key, an object
// such as backoff merges key by key (so {"backoff":{"base":"2s"}} leaves max
// to the YAML), and a null removes that key's override. Values are stored as
// the effective policy writes them ("1m" as "1m0s"). The result over
// Default(kind) and registered must be a valid policy.
//
// patch must be a JSON object. A top-level key that no policy has wraps
// ErrUnknownField; a value of the wrong type or one the policy refuses is an
// *Error; any other error is about the stored override.
func Patch(kind string, registered, override, patch []byte) (map[string]json.RawMessage, error) {
	var byKey map[string]json.RawMessage
	if err := json.Unmarshal(patch, &byKey); err != nil {
		return nil, fmt.Errorf("policy patch: %w", err)
	}
	if len(byKey) == 0 {
		return nil, &Error{Msg: "the patch names no policy field"}
	}
	for _, k := range slices.Sorted(maps.Keys(byKey)) {
		if !fields[k] {
			return nil, fmt.Errorf("%w %q", ErrUnknownField, k)
		}
		// Decode each field alone first, so that a wrong type names its field.
		var v any
		dec := json.NewDecoder(bytes.NewReader(byKey[k]))
		dec.UseNumber() // 1e400 is the probe's to refuse, naming the field
		if err := dec.Decode(&v); err != nil {
			return nil, fmt.Errorf("policy patch: %s: %w", k, err)
		}
		if v = withoutNulls(v); v == nil {
			continue
		}
		one, _ := json.Marshal(map[string]any{k: v})
		var probe Policy
		if err := json.Unmarshal(one, &probe); err != nil {
			return nil, &Error{Field: "policy." + k, Msg: strings.TrimPrefix(err.Error(), "json: ")}
		}
	}
	if len(bytes.TrimSpace(override)) == 0 {
		override = []byte("{}")
	}
	merged, err := jsonpatch.MergePatch(override, patch)
	if err != nil {
		return nil, fmt.Errorf("stored policy_override: %w", err)
	}
	var out map[string]any
	dec := json.NewDecoder(bytes.NewReader(merged))
	dec.UseNumber() // a number past float64 in a nested key reaches the policy's check below
	if err := dec.Decode(&out); err != nil {
		return nil, fmt.Errorf("stored policy_override: %w", err)
	}
	out = withoutEmpty(out)
	outJSON, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	// Removing an override can expose a YAML value that no longer fits the rest.
	effective, err := Effective(kind, registered, outJSON)
	if err != nil {
		var bad *Error
		if !errors.As(err, &bad) {
			bad = &Error{Msg: err.Error()}
		}
		return nil, bad
	}
	b, err := json.Marshal(effective)
	if err != nil {
		return nil, err
	}
	var canonical map[string]any
	if err := json.Unmarshal(b, &canonical); err != nil {
		return nil, err
	}
	result := map[string]json.RawMessage{}
	for k, v := range out {
		if result[k], err = json.Marshal(canonicalize(v, canonical[k])); err != nil {
			return nil, err
		}
	}
	return result, nil
}

// withoutNulls returns v with every null member of its objects removed; nil when v is null.
func withoutNulls(v any) any {
	m, ok := v.(map[string]any)
	if !ok {
		return v
	}
	out := map[string]any{}
	for k, x := range m {
		if x = withoutNulls(x); x != nil {
			out[k] = x
		}
	}
	return out
}

// withoutEmpty returns m without the objects that a patch emptied.
func withoutEmpty(m map[string]any) map[string]any {
	for k, v := range m {
		if sub, ok := v.(map[string]any); ok {
			if sub = withoutEmpty(sub); len(sub) == 0 {
				delete(m, k)
			}
		}
	}
	return m
}

// canonicalize returns, for each leaf of the override value v, the value the
// effective policy has there.
func canonicalize(v, effective any) any {
	m, ok := v.(map[string]any)
	e, eok := effective.(map[string]any)
	if !ok || !eok {
		if effective == nil {
			return v
		}
		return effective
	}
	out := make(map[string]any, len(m))
	for k, x := range m {
		out[k] = canonicalize(x, e[k])
	}
	return out
}
