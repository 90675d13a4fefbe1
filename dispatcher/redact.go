package dispatcher

import (
	"encoding/json"
	"strings"
)

// Masked is what a redacted payload field shows instead of its value.
const Masked = "***"

// minMasked is the shortest value RedactText replaces in free text: a shorter
// one tells little and would mangle every word that contains it.
const minMasked = 3

// RedactPayload returns payload with each top-level field named in fields
// replaced by "***". A payload that is not a JSON object is returned whole
// as "***" when fields is not empty, so nothing leaks through a parse failure.
func RedactPayload(payload json.RawMessage, fields []string) json.RawMessage {
	if len(fields) == 0 || payload == nil {
		return payload
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(payload, &m); err != nil {
		return json.RawMessage(`"` + Masked + `"`)
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
