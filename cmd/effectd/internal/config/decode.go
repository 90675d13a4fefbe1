package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// Error is a configuration error at one key of the YAML: its path from the
// document's root (channels.sms.policy.lease) and the line of that key.
type Error struct {
	Path []string // keys from the root; empty for the document itself
	Line int      // 0 when the key is not in the file (a default)
	Msg  string
}

// Error reads "channels.sms.policy.lease: line 7: must be at least 1s".
func (e *Error) Error() string {
	var parts []string
	if len(e.Path) > 0 {
		parts = append(parts, strings.Join(e.Path, "."))
	}
	if e.Line > 0 {
		parts = append(parts, "line "+strconv.Itoa(e.Line))
	}
	return strings.Join(append(parts, e.Msg), ": ")
}

// maxMessage bounds an error message: a refused value is quoted short, and
// nothing a file holds is ever echoed whole.
const maxMessage = 300

// quote returns s quoted, cut to a few dozen bytes.
func quote(s string) string {
	const n = 40
	if len(s) > n {
		return strconv.Quote(s[:n]) + "…"
	}
	return strconv.Quote(s)
}

// shorten cuts a message to maxMessage bytes.
func shorten(msg string) string {
	if len(msg) > maxMessage {
		return msg[:maxMessage] + "…"
	}
	return msg
}

// notUTF8 names the line of the first byte of b that is not UTF-8. A config
// file is UTF-8 text: yaml.v3 would also read UTF-16, but its errors there
// name no line.
func notUTF8(b []byte) error {
	i := 0
	for i < len(b) {
		r, size := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && size <= 1 {
			break
		}
		i += size
	}
	return fmt.Errorf("line %d: the file must be UTF-8 text (byte %d is not)", bytes.Count(b[:i], []byte("\n"))+1, i+1)
}

// decodeDocument decodes the YAML document b onto f and returns its root
// node, for finding the line of a key later. Every error is an *Error naming
// the key and its line, or a yaml.v3 syntax error with its line.
func decodeDocument(b []byte, f *File) (*yaml.Node, error) {
	if !utf8.Valid(b) {
		return nil, notUTF8(b)
	}
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(b)).Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, errors.New("channels: the file is empty; define at least one channel")
		}
		return nil, errors.New(shorten(yamlMessage(err)))
	}
	root := &doc
	if root.Kind == yaml.DocumentNode && len(root.Content) == 1 {
		root = root.Content[0]
	}
	return root, decode(nil, root, reflect.ValueOf(f).Elem())
}

var (
	unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()
	// unmarshalFuncType is the other form yaml.v3 calls, which takes a
	// decoding function: effectdtype's Duration and PollDelays have it.
	unmarshalFuncType = reflect.TypeFor[interface{ UnmarshalYAML(func(any) error) error }]()
	nodeType          = reflect.TypeFor[yaml.Node]()
	// linePrefix is how yaml.v3 and our own unmarshalers start a message.
	linePrefix = regexp.MustCompile(`^(yaml: )?(unmarshal errors:\n\s*)?line \d+: `)
)

// decode sets v from n. A mapping onto a struct or a map is walked key by key
// (an unknown or repeated key is refused with its line); anything else is
// decoded by yaml.v3 from its own node, so an error names the key it is under
// and that key's line, also inside a flow mapping such as {a: 1, b: x}.
func decode(path []string, n *yaml.Node, v reflect.Value) error {
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	t := v.Type()
	switch {
	case t == nodeType:
		v.Set(reflect.ValueOf(*n))
		return nil
	case n.Tag == "!!null" && (t.Kind() == reflect.Pointer || t.Kind() == reflect.Struct || t.Kind() == reflect.Map):
		return nil // absent, as with yaml.v3
	case reflect.PointerTo(t).Implements(unmarshalerType), reflect.PointerTo(t).Implements(unmarshalFuncType):
	case t.Kind() == reflect.Pointer:
		if v.IsNil() {
			v.Set(reflect.New(t.Elem()))
		}
		return decode(path, n, v.Elem())
	case t.Kind() == reflect.Struct || t.Kind() == reflect.Map && t.Key().Kind() == reflect.String:
		if n.Kind != yaml.MappingNode {
			return &Error{Path: path, Line: n.Line, Msg: "want a mapping of keys to values"}
		}
		return decodeMapping(path, n, v)
	case t.Kind() == reflect.Slice && n.Kind == yaml.SequenceNode:
		s := reflect.MakeSlice(t, len(n.Content), len(n.Content))
		for i, item := range n.Content {
			p := slices.Clone(path)
			if len(p) > 0 {
				p[len(p)-1] += "[" + strconv.Itoa(i) + "]"
			}
			if err := decode(p, item, s.Index(i)); err != nil {
				return err
			}
		}
		v.Set(s)
		return nil
	}
	if err := n.Decode(v.Addr().Interface()); err != nil {
		msg := yamlMessage(err)
		if m := linePrefix.FindString(err.Error()); m != "" {
			msg = strings.TrimPrefix(err.Error(), m)
		}
		return &Error{Path: path, Line: n.Line, Msg: shorten(strings.ReplaceAll(msg, "\n", " "))}
	}
	return nil
}

// decodeMapping walks the mapping n onto v, a struct or a map with string keys.
// Merge keys (<<: *base) are applied first, so that the mapping's own keys win.
func decodeMapping(path []string, n *yaml.Node, v reflect.Value) error {
	var fields map[string]int // yaml key → struct field index
	if v.Kind() == reflect.Struct {
		fields = yamlFields(v.Type())
	} else if v.IsNil() {
		v.Set(reflect.MakeMap(v.Type()))
	}
	seen := map[string]int{} // key → its line
	for pass := range 2 {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			if merge := k.Tag == "!!merge"; merge != (pass == 0) {
				continue
			} else if merge {
				if err := decodeMerge(path, val, v); err != nil {
					return err
				}
				continue
			}
			if k.Kind != yaml.ScalarNode {
				return &Error{Path: path, Line: k.Line, Msg: "a key must be a plain string"}
			}
			key := k.Value
			if first, ok := seen[key]; ok {
				return &Error{Path: path, Line: k.Line, Msg: fmt.Sprintf("key %s is repeated (first at line %d)", quote(key), first)}
			}
			seen[key] = k.Line
			sub := append(slices.Clone(path), key)
			if fields == nil {
				elem := reflect.New(v.Type().Elem()).Elem()
				if err := decode(sub, val, elem); err != nil {
					return err
				}
				v.SetMapIndex(reflect.ValueOf(key).Convert(v.Type().Key()), elem)
				continue
			}
			idx, ok := fields[key]
			if !ok {
				return &Error{Path: path, Line: k.Line, Msg: fmt.Sprintf("field %s not found (want %s)", truncate(key), knownKeys(fields))}
			}
			if err := decode(sub, val, v.Field(idx)); err != nil {
				return err
			}
		}
	}
	return nil
}

// decodeMerge applies the value of a merge key: a mapping or a list of them.
func decodeMerge(path []string, val *yaml.Node, v reflect.Value) error {
	for val.Kind == yaml.AliasNode && val.Alias != nil {
		val = val.Alias
	}
	if val.Kind == yaml.SequenceNode {
		for _, m := range val.Content {
			if err := decode(path, m, v); err != nil {
				return err
			}
		}
		return nil
	}
	return decode(path, val, v)
}

// yamlFields maps the yaml keys of struct type t to its field indexes.
func yamlFields(t reflect.Type) map[string]int {
	out := map[string]int{}
	for i := range t.NumField() {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
		if !f.IsExported() || name == "-" {
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = i
	}
	return out
}

func knownKeys(fields map[string]int) string {
	keys := make([]string, 0, len(fields))
	for k := range fields {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return strings.Join(keys, ", ")
}

// truncate cuts a key to a few dozen bytes for a message.
func truncate(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}

// lineOf returns the line of the deepest key of path found under root, 0 when
// not even the first is there.
func lineOf(root *yaml.Node, path []string) int {
	line, n := 0, root
	for _, key := range path {
		for n != nil && n.Kind == yaml.AliasNode {
			n = n.Alias
		}
		if n == nil || n.Kind != yaml.MappingNode {
			return line
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == key {
				line, next = n.Content[i].Line, n.Content[i+1]
			}
		}
		if next == nil {
			return line
		}
		n = next
	}
	return line
}
