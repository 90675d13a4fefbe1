package dispatcher_test

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// textErr is a permanent provider error with the text a test picks.
type textErr string

func (e textErr) Error() string   { return string(e) }
func (e textErr) Retryable() bool { return false }
func (e textErr) MaybeSent() bool { return false }

// TestLongErrorTextIsStored: a provider error longer than the stored limit
// whose cut falls inside a multi-byte character, one holding invalid UTF-8 and
// one holding a NUL byte, each in a completion batch beside a sent intent. The
// text stored is valid UTF-8 that PostgreSQL accepts, so every outcome of the
// batch is written at once instead of being retried and left to the reconciler.
func TestLongErrorTextIsStored(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("x", 999) + "é" + strings.Repeat("y", 50) // "é" is 2 bytes: bytes 1000 and 1001
	p := &scripted{calls: map[string]int{}, answer: func(key string, n int) (string, error) {
		switch key {
		case "c:long":
			return "", textErr(long)
		case "c:invalid":
			return "", textErr("receiver said \xff\xfe")
		case "c:nul":
			return "", textErr("receiver said a\x00b")
		}
		return "ref-" + key, nil
	}}
	r := start(t, "webhook", p, fastPolicy("webhook"))
	r.enqueue(t, "ok", "long", "invalid", "nul")

	got := r.waitStatus(t, "long", "FAILED")
	if !utf8.ValidString(got.LastError) || len(got.LastError) > 1000 || !strings.HasPrefix(got.LastError, strings.Repeat("x", 990)) {
		t.Errorf("long: last_error %q (%d bytes); want valid UTF-8 of at most 1000 bytes from the start of the text", got.LastError, len(got.LastError))
	}
	if got := r.waitStatus(t, "invalid", "FAILED"); got.LastError != "receiver said \uFFFD" {
		t.Errorf("invalid: last_error %q", got.LastError)
	}
	if got := r.waitStatus(t, "nul", "FAILED"); got.LastError != "receiver said a\uFFFDb" {
		t.Errorf("nul: last_error %q", got.LastError)
	}
	r.waitStatus(t, "ok", "SENT")
}
