package fieldrule

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// Object is a payload decoded one level deep. A field whose value is JSON null
// counts as absent, as in the SQL rules.
type Object map[string]json.RawMessage

// Decode reads raw as a JSON object. A repeated key keeps its last value, as
// PostgreSQL's jsonb does.
func Decode(raw []byte) (Object, error) {
	var o Object
	if err := json.Unmarshal(raw, &o); err != nil || o == nil {
		return nil, errors.New("payload: must be a JSON object")
	}
	for k, v := range o {
		if bytes.Equal(v, []byte("null")) {
			delete(o, k)
		}
	}
	return o, nil
}

// OnlyKeys refuses a key that is not in keys, naming the first such key in
// byte order; what names the payload's kind ("an SMS").
func (o Object) OnlyKeys(what string, keys ...string) error {
	var unknown []string
	for k := range o {
		if !slices.Contains(keys, k) {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) == 0 {
		return nil
	}
	slices.Sort(unknown)
	return fmt.Errorf("payload.%s: is not a field of %s (known: %s)", Truncate(unknown[0], 64), what, strings.Join(keys, ", "))
}

// String returns the field's string value, refusing a value that is not a
// string matching re (described by what), or an absent one when required.
func (o Object) String(field string, required bool, re *regexp.Regexp, what string) (string, error) {
	v, ok := o[field]
	if !ok {
		return "", absent(field, required)
	}
	var s string
	if err := json.Unmarshal(v, &s); err != nil || !re.MatchString(s) {
		return "", fmt.Errorf("payload.%s: must be %s, got %s", field, what, Truncate(string(v), 40))
	}
	return s, nil
}

// Has reports whether the field is present and a string.
func (o Object) Has(field string) bool {
	v, ok := o[field]
	return ok && len(v) > 0 && v[0] == '"'
}

// PositiveInt returns the field's value, refusing one that is not a positive
// integer written without fraction or exponent that fits in 64 bits, or an
// absent one when required. nil means absent.
func (o Object) PositiveInt(field string, required bool) (*int64, error) {
	v, ok := o[field]
	if !ok {
		return nil, absent(field, required)
	}
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || n <= 0 || !digits.Match(v) {
		return nil, fmt.Errorf("payload.%s: must be a positive integer (at most 9223372036854775807), got %s", field, Truncate(string(v), 40))
	}
	return &n, nil
}

var digits = regexp.MustCompile(`^[0-9]{1,19}$`)

// Bool returns the field's value, refusing one that is not true or false;
// absent is false.
func (o Object) Bool(field string) (bool, error) {
	v, ok := o[field]
	if !ok {
		return false, nil
	}
	var b bool
	if err := json.Unmarshal(v, &b); err != nil {
		return false, fmt.Errorf("payload.%s: must be true or false, got %s", field, Truncate(string(v), 40))
	}
	return b, nil
}

func absent(field string, required bool) error {
	if required {
		return fmt.Errorf("payload.%s: is required", field)
	}
	return nil
}

// Truncate cuts s to at most n runes, for quoting a value in a message.
func Truncate(s string, n int) string {
	for i := range s {
		if n == 0 {
			return s[:i]
		}
		n--
	}
	return s
}
