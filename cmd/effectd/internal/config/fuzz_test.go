package config

import (
	"regexp"
	"testing"
)

// namesWhere matches an error that says where the problem is: a field path
// (channels.<name>...) or a YAML position (line N).
var namesWhere = regexp.MustCompile(`^channels\b|\bline \d+\b`)

// documentErrors are yaml.v3's errors that carry no line: about the
// document's encoding, aliasing or depth, an undefined anchor, or its very end.
var documentErrors = regexp.MustCompile(`UTF-8|UTF-16|Unicode|octet|control characters|excessive aliasing|exceeded max depth|unknown anchor|unexpected end of stream`)

// FuzzParse: config.Parse never panics, and every error says where the problem
// is. Plain go test runs the seeds in testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	hook := "    provider: webhook\n    webhook: {url: 'http://127.0.0.1:1/x', secret_env: HOOK_SECRET}\n"
	for _, s := range []string{
		"channels:\n  x:\n" + hook,
		"channels:\n  x:\n" + hook + "    policy: {lease: 5s, in_doubt: manual, backoff: {base: 1s, max: 1m}}\n",
		"channels:\n  s:\n    provider: twilio\n    twilio: {from: '+15005550006'}\n    policy: {rate_per_second: 1}\n",
		"channels:\n  r:\n    provider: stripe\n    stripe: {base_url: ''}\n    max_payload: 1024\n",
		"channels:\n  x:\n" + hook + "    policy: {lease: -1s}\n",
		"channels:\n  x:\n" + hook + "    policy: [1, 2]\n",
		"channels: [a, b]\n",
		"channels:\n  x: &a {provider: webhook}\n  y: *a\n",
		"channels:\n  x:\n" + hook + "    policy: {max_attempts: 99999999999999999999}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		chans, err := Parse(b, getenv)
		if err == nil {
			if len(chans) == 0 {
				t.Fatalf("Parse(%q) accepted a configuration without channels", b)
			}
			for _, c := range chans {
				if c.Provider == nil {
					t.Fatalf("Parse(%q): channel %s has no provider", b, c.Name)
				}
				if err := c.Policy.Validate(); err != nil {
					t.Fatalf("Parse(%q): channel %s has an invalid policy: %v", b, c.Name, err)
				}
			}
			return
		}
		msg := err.Error()
		if namesWhere.MatchString(msg) {
			return
		}
		if documentErrors.MatchString(msg) {
			return
		}
		// yaml.v3 leaves out the line of an error on the first line (line 0 to
		// it): with one more line in front, the same error must name its line.
		if _, err := Parse(append([]byte("\n"), b...), getenv); err != nil && namesWhere.MatchString(err.Error()) {
			return
		}
		t.Fatalf("Parse(%q): error %q names neither a field nor a line", b, msg)
	})
}

// FuzzParseCitus: ParseCitus never panics, what it accepts is in range, and
// every error says where the problem is.
func FuzzParseCitus(f *testing.F) {
	hook := "channels:\n  x:\n    provider: webhook\n    webhook: {url: 'http://127.0.0.1:1/x', secret_env: HOOK_SECRET}\n"
	for _, s := range []string{
		hook + "database:\n  citus: {colocate_with: producer.orders, bucket_column: bucket, buckets: 32}\n",
		hook + "database:\n  citus: {colocate_with: orders, bucket_column: bucket, buckets: 32}\n",
		hook + "database:\n  citus:\n    colocate_with: p.o\n    bucket_column: B\n    buckets: -1\n",
		hook + "database: [1]\n",
		"database:\n  citus: {buckets: 99999999999999999999}\n",
	} {
		f.Add([]byte(s))
	}
	where := regexp.MustCompile(`^(channels|database)\b|\bline \d+\b`)
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseCitus(b)
		if err == nil {
			if c != nil && (c.Buckets < 1 || c.Buckets > MaxBuckets || c.Schema == "" || c.Table == "" || c.Column == "") {
				t.Fatalf("ParseCitus(%q) accepted %+v", b, c)
			}
			return
		}
		msg := err.Error()
		if where.MatchString(msg) || documentErrors.MatchString(msg) {
			return
		}
		if _, err := ParseCitus(append([]byte("\n"), b...)); err != nil && where.MatchString(err.Error()) {
			return
		}
		t.Fatalf("ParseCitus(%q): error %q names neither a field nor a line", b, msg)
	})
}
