package dispatcher

import (
	"bytes"
	"encoding/json"
	"strings"
)

// Masked is what a redacted payload field shows instead of its value.
const Masked = "***"

// minMasked is the shortest value RedactText replaces in free text: a shorter
// one tells little and would mangle every word that contains it.
const minMasked = 3

// RedactPayload returns payload with each top-level field named in fields
// replaced by "***". A payload that is not a JSON object has every value
// masked (MaskValues) when fields is not empty, so nothing leaks through a
// parse failure.
func RedactPayload(payload json.RawMessage, fields []string) json.RawMessage {
	if len(fields) == 0 || payload == nil {
		return payload
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(payload, &m); err != nil {
		return MaskValues(payload)
	}
	masked := json.RawMessage(`"` + Masked + `"`)
	changed := false
	for _, f := range fields {
		if _, ok := m[f]; ok {
			m[f], changed = masked, true
		}
	}
	if !changed {
		return payload
	}
	b, err := json.Marshal(m)
	if err != nil {
		return json.RawMessage(`"` + Masked + `"`)
	}
	return b
}

// RedactText returns s with every value of payload's redacted fields (as
// text, and as it is written inside a JSON string) replaced by "***": for
// error messages that quote what was sent.
func RedactText(s string, payload json.RawMessage, fields []string) string {
	if len(fields) == 0 || s == "" {
		return s
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(payload, &m); err != nil {
		return s
	}
	for _, f := range fields {
		raw, ok := m[f]
		if !ok {
			continue
		}
		var text string
		if json.Unmarshal(raw, &text) != nil {
			text = string(raw) // a number or an object: its JSON text
		}
		for _, v := range []string{text, strings.Trim(string(raw), `"`)} {
			if len(v) >= minMasked {
				s = strings.ReplaceAll(s, v, Masked)
			}
		}
	}
	return s
}

// MaskValues returns doc with every string and number in it replaced by
// "***", its shape kept: objects keep their keys, arrays their length,
// booleans and nulls stay. For a document whose fields are not the payload's
// (a provider's event names the number To), where RedactPayload cannot tell
// which to mask. Text that is not JSON is returned as "***".
func MaskValues(doc json.RawMessage) json.RawMessage {
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return json.RawMessage(`"` + Masked + `"`)
	}
	b, err := json.Marshal(maskValues(v))
	if err != nil {
		return json.RawMessage(`"` + Masked + `"`)
	}
	return b
}

func maskValues(v any) any {
	switch v := v.(type) {
	case string, json.Number:
		return Masked
	case map[string]any:
		for k, x := range v {
			v[k] = maskValues(x)
		}
	case []any:
		for i, x := range v {
			v[i] = maskValues(x)
		}
	}
	return v
}
