package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/fixture"
	"github.com/effectd/effectd/internal/pgtest"
)

// Hostile strings that go into every text field somewhere below.
const (
	injection      = `x'); DROP TABLE effectd.intents; --`
	injectionOr    = `' OR '1'='1`
	injectionUnion = `1 UNION SELECT secret FROM pg_authid`
)

// snapshot returns a digest of every row effectd keeps, to show that a
// refused request changed nothing.
func (s *stack) snapshot(t *testing.T) string {
	t.Helper()
	var d string
	err := s.pool.QueryRow(context.Background(), `
SELECT md5(coalesce(string_agg(r, '|' ORDER BY r), '')) FROM (
    SELECT i::text AS r FROM effectd.intents i
    UNION ALL SELECT c::text FROM effectd.channels c
    UNION ALL SELECT a::text FROM effectd.attempts a
    UNION ALL SELECT a::text FROM effectd.audit a) rows`).Scan(&d)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestAbuseSQLFunction: malformed, oversized and hostile arguments to
// effectd.enqueue are refused with a SQLSTATE and a message naming the field,
// and insert nothing; an injection string in a valid event id is stored verbatim.
func TestAbuseSQLFunction(t *testing.T) {
	t.Parallel()
	s := newStack(t, pgtest.URL(t))
	ctx := context.Background()
	big := `'{"blob":"` + strings.Repeat("x", 1<<20) + `"}'`
	deep := `'{"a":` + strings.Repeat("[", 30000) + strings.Repeat("]", 30000) + `}'`
	cases := []struct {
		name, args  string // the arguments of effectd.enqueue, as SQL
		code, field string
	}{
		{"empty event_id", `'', 'hook', '{}'`, "22023", "event_id"},
		{"null event_id", `NULL, 'hook', '{}'`, "22023", "event_id"},
		{"event_id over 255 bytes", `repeat('é', 128), 'hook', '{}'`, "22023", "event_id"},
		{"injection in channel", `'e1', $$` + injection + `$$, '{}'`, "22023", "channel"},
		{"or-injection in channel", `'e1', $$hook` + injectionOr + `$$, '{}'`, "22023", "channel"},
		{"null channel", `'e1', NULL, '{}'`, "22023", "channel"},
		{"1 MB payload", `'e1', 'hook', ` + big, "22023", "payload"},
		{"payload array", `'e1', 'hook', '[1]'`, "22023", "payload"},
		{"payload string", `'e1', 'hook', '"{}"'`, "22023", "payload"},
		{"payload null", `'e1', 'hook', NULL`, "22023", "payload"},
		{"payload not JSON", `'e1', 'hook', '{x}'`, "22P02", "json"},
		{"NUL escape in payload", `'e1', 'hook', '{"a":"\u0000"}'`, "22P05", "Unicode escape"},
		{"NUL byte in event_id", `convert_from('\x610062'::bytea, 'UTF8'), 'hook', '{}'`, "22021", "0x00"},
		{"invalid UTF-8 in event_id", `convert_from('\xfffe'::bytea, 'UTF8'), 'hook', '{}'`, "22021", "UTF8"},
		{"invalid UTF-8 in channel", `'e1', convert_from('\xc328'::bytea, 'UTF8'), '{}'`, "22021", "UTF8"},
		{"deeply nested payload", `'e1', 'hook', ` + deep, "54001", "stack depth"}, // PostgreSQL's own limit, before the function runs
		{"occurred_at past retention", `'e1', 'hook', '{}', occurred_at => now() - interval '400 hours'`, "22023", "occurred_at"},
		{"empty ordering_key", `'e1', 'hook', '{}', ordering_key => ''`, "22023", "ordering_key"},
		{"injection in ordering_key and bad payload", `'e1', 'hook', '[]', ordering_key => $$` + injection + `$$`, "22023", "payload"},
		// Times Go and JSON cannot carry.
		{"occurred_at infinity", `'e1', 'hook', '{}', occurred_at => 'infinity'`, "22023", "occurred_at"},
		{"occurred_at -infinity", `'e1', 'hook', '{}', occurred_at => '-infinity'`, "22023", "occurred_at"},
		{"occurred_at in year 12000", `'e1', 'hook', '{}', occurred_at => '12000-01-01'`, "22023", "occurred_at"},
		{"not_before infinity", `'e1', 'hook', '{}', not_before => 'infinity'`, "22023", "not_before"},
		{"not_before past 9999 in UTC", `'e1', 'hook', '{}', not_before => '9999-12-31 23:00-05'`, "22023", "not_before"},
		{"not_before before year 1", `'e1', 'hook', '{}', not_before => '0044-03-15 BC'`, "22023", "not_before"},
		// Event ids an HTTP header cannot carry, and keys an index cannot hold.
		{"event_id with trailing space", `'ws-1 ', 'hook', '{}'`, "22023", "event_id"},
		{"event_id with leading space", `' ws-1', 'hook', '{}'`, "22023", "event_id"},
		{"event_id with trailing no-break space", `E'ws-1\u00a0', 'hook', '{}'`, "22023", "event_id"},
		{"event_id with CR LF", `E'ws-1\r\nX-Injected: 1', 'hook', '{}'`, "22023", "event_id"},
		{"event_id with a tab", `E'ws\t1', 'hook', '{}'`, "22023", "event_id"},
		{"event_id with DEL", `E'ws\u007f1', 'hook', '{}'`, "22023", "event_id"},
		{"event_id with a C1 control", `E'ws\u00851', 'hook', '{}'`, "22023", "event_id"},
		{"ordering_key of 3000 bytes", `'e1', 'hook', '{}', ordering_key => repeat('k', 3000)`, "22023", "ordering_key"},
		{"ordering_key of 256 bytes", `'e1', 'hook', '{}', ordering_key => repeat('k', 256)`, "22023", "ordering_key"},
		// Amplification: nesting past 32 levels.
		{"payload nested 33 deep", `'e1', 'hook', ('{"a":' || repeat('[', 32) || repeat(']', 32) || '}')::jsonb`, "22023", "payload"},
		{"payload nested 33 deep in objects", `'e1', 'hook', (repeat('{"a":', 33) || '1' || repeat('}', 33))::jsonb`, "22023", "payload"},
		// Payloads the providers' senders refuse.
		{"stripe amount 1e30", `'e1', 'pay', '{"type":"refund","payment_intent":"pi_1","amount":1e30}'`, "22023", "payload.amount"},
		{"stripe amount 1.0", `'e1', 'pay', '{"type":"refund","payment_intent":"pi_1","amount":1.0}'`, "22023", "payload.amount"},
		{"stripe amount past int64", `'e1', 'pay', '{"type":"transfer","amount":9223372036854775808,"currency":"usd","destination":"acct_1"}'`, "22023", "payload.amount"},
		{"stripe unknown field", `'e1', 'pay', '{"type":"refund","payment_intent":"pi_1","metadata":{"a":"b"}}'`, "22023", "payload.metadata"},
		{"stripe field of another type", `'e1', 'pay', '{"type":"refund","payment_intent":"pi_1","currency":"usd"}'`, "22023", "payload.currency"},
		{"stripe currency dollars", `'e1', 'pay', '{"type":"payment_intent","amount":100,"currency":"dollars"}'`, "22023", "payload.currency"},
		{"stripe confirm not a boolean", `'e1', 'pay', '{"type":"payment_intent","amount":100,"currency":"usd","confirm":"yes"}'`, "22023", "payload.confirm"},
		{"stripe refund reason unknown", `'e1', 'pay', '{"type":"refund","charge":"ch_1","reason":"because"}'`, "22023", "payload.reason"},
		{"stripe id with a space", `'e1', 'pay', '{"type":"refund","charge":"ch 1"}'`, "22023", "payload.charge"},
		{"sms to hello", `'e1', 'text', '{"to":"hello","body":"hi"}'`, "22023", "payload.to"},
		{"sms unknown field", `'e1', 'text', '{"to":"+15005550006","body":"hi","media_url":"x"}'`, "22023", "payload.media_url"},
		{"sms body a number", `'e1', 'text', '{"to":"+15005550006","body":5}'`, "22023", "payload.body"},
		{"sms from not a sender", `'e1', 'text', '{"to":"+15005550006","body":"hi","from":"+1"}'`, "22023", "payload.from"},
	}
	// A Stripe and a Twilio channel, for the payload shapes.
	fixture.AddChannel(t, s.pool, "pay", "stripe")
	fixture.AddChannel(t, s.pool, "text", "twilio")
	before := s.snapshot(t)
	for _, c := range cases {
		_, err := s.pool.Exec(ctx, `SELECT effectd.enqueue(`+c.args+`)`)
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) {
			t.Errorf("%s: err = %v, want a PostgreSQL error", c.name, err)
			continue
		}
		if (c.code != "" && pgErr.Code != c.code) || !strings.Contains(pgErr.Message, c.field) {
			t.Errorf("%s: SQLSTATE %s %q; want %s naming %q", c.name, pgErr.Code, pgErr.Message, c.code, c.field)
		}
		if pgErr.Code == "22023" && pgErr.ColumnName != c.field {
			t.Errorf("%s: COLUMN %q, want %q", c.name, pgErr.ColumnName, c.field)
		}
	}
	if after := s.snapshot(t); after != before {
		t.Errorf("refused calls changed the database")
	}
	// Injection strings are data, stored and read back verbatim.
	for _, id := range []string{injection, injectionOr, injectionUnion} {
		s.enqueue(t, id, "hook", 0)
	}
	var n int
	s.pool.QueryRow(ctx, `SELECT count(*) FROM effectd.intents WHERE event_id = ANY($1)`, []string{injection, injectionOr, injectionUnion}).Scan(&n)
	if n != 3 {
		t.Errorf("%d of 3 injection event ids stored verbatim", n)
	}
}

// TestAbuseGoAPI: dispatcher.Enqueue refuses what PostgreSQL cannot store or
// the function refuses with an *InputError naming the field, and inserts nothing.
func TestAbuseGoAPI(t *testing.T) {
	t.Parallel()
	s := newStack(t, pgtest.URL(t))
	ctx := context.Background()
	deep := []byte(`{"a":` + strings.Repeat("[", 20000) + strings.Repeat("]", 20000) + `}`)
	cases := []struct {
		name  string
		in    dispatcher.Intent
		field string
	}{
		{"empty event id", dispatcher.Intent{Channel: "hook", Payload: map[string]any{}}, "event_id"},
		{"NUL in event id", dispatcher.Intent{EventID: "a\x00b", Channel: "hook", Payload: map[string]any{}}, "event_id"},
		{"invalid UTF-8 event id", dispatcher.Intent{EventID: "\xff\xfe", Channel: "hook", Payload: map[string]any{}}, "event_id"},
		{"invalid UTF-8 channel", dispatcher.Intent{EventID: "e", Channel: "hook\xc3", Payload: map[string]any{}}, "channel"},
		{"NUL in ordering key", dispatcher.Intent{EventID: "e", Channel: "hook", Payload: map[string]any{}, OrderingKey: "\x00"}, "ordering_key"},
		{"injection channel", dispatcher.Intent{EventID: "e", Channel: injection, Payload: map[string]any{}}, "channel"},
		{"nil payload", dispatcher.Intent{EventID: "e", Channel: "hook"}, "payload"},
		{"invalid JSON", dispatcher.Intent{EventID: "e", Channel: "hook", Payload: []byte(`{"a":`)}, "payload"},
		{"JSON array", dispatcher.Intent{EventID: "e", Channel: "hook", Payload: json.RawMessage(`[]`)}, "payload"},
		{"invalid UTF-8 in payload", dispatcher.Intent{EventID: "e", Channel: "hook", Payload: []byte("{\"a\":\"\xff\"}")}, "payload"},
		{"NUL in a payload string", dispatcher.Intent{EventID: "e", Channel: "hook", Payload: map[string]any{"a": "x\x00y"}}, "payload"},
		{"lone surrogate", dispatcher.Intent{EventID: "e", Channel: "hook", Payload: `{"a":"\ud800"}`}, "payload"},
		{"number past numeric", dispatcher.Intent{EventID: "e", Channel: "hook", Payload: `{"a":1e1000000}`}, "payload"},
		{"deeply nested", dispatcher.Intent{EventID: "e", Channel: "hook", Payload: deep}, "payload"},
		{"1 MB payload", dispatcher.Intent{EventID: "e", Channel: "hook", Payload: map[string]any{"blob": strings.Repeat("x", 1<<20)}}, "payload"},
		{"unmarshalable payload", dispatcher.Intent{EventID: "e", Channel: "hook", Payload: map[string]any{"f": func() {}}}, "payload"},
		{"occurred long ago", dispatcher.Intent{EventID: "e", Channel: "hook", Payload: map[string]any{}, OccurredAt: time.Now().Add(-400 * time.Hour)}, "occurred_at"},
		{"occurred in year 10000", dispatcher.Intent{EventID: "e", Channel: "hook", Payload: map[string]any{}, OccurredAt: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, "occurred_at"},
		{"not before year 10000", dispatcher.Intent{EventID: "e", Channel: "hook", Payload: map[string]any{}, NotBefore: time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)}, "not_before"},
		{"event id with trailing space", dispatcher.Intent{EventID: "ws-1 ", Channel: "hook", Payload: map[string]any{}}, "event_id"},
		{"event id with CR LF", dispatcher.Intent{EventID: "ws-1\r\n", Channel: "hook", Payload: map[string]any{}}, "event_id"},
		{"ordering key of 4 KB", dispatcher.Intent{EventID: "e", Channel: "hook", Payload: map[string]any{}, OrderingKey: strings.Repeat("k", 4096)}, "ordering_key"},
		{"nested 40 deep", dispatcher.Intent{EventID: "e", Channel: "hook", Payload: `{"a":` + strings.Repeat("[", 40) + strings.Repeat("]", 40) + `}`}, "payload"},
	}
	before := s.snapshot(t)
	for _, c := range cases {
		err := func() error {
			tx, err := s.pool.Begin(ctx)
			if err != nil {
				t.Fatal(err)
			}
			defer tx.Rollback(ctx)
			_, err = dispatcher.Enqueue(ctx, tx, c.in)
			return err
		}()
		var bad *dispatcher.InputError
		if !errors.As(err, &bad) || bad.Field != c.field || !strings.Contains(bad.Error(), c.field) {
			t.Errorf("%s: err = %v (%T); want an *InputError on %s", c.name, err, err, c.field)
		}
	}
	if after := s.snapshot(t); after != before {
		t.Errorf("refused intents changed the database")
	}
}

// TestAbuseConfig: a malformed, oversized or hostile YAML stops migrate with
// exit 1 and one line naming the field or position, before touching the database.
func TestAbuseConfig(t *testing.T) {
	t.Parallel()
	s := newStack(t, pgtest.URL(t))
	dir := t.TempDir()
	hook := "    provider: webhook\n    webhook: {url: 'http://127.0.0.1:1/x', secret_env: HOOK_SECRET}\n"
	laughs := "a: &a [x, x, x, x, x, x, x, x, x]\n"
	for i := 'b'; i <= 'j'; i++ {
		laughs += fmt.Sprintf("%c: &%c [*%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c]\n", i, i, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1, i-1)
	}
	cases := []struct{ name, yaml, want string }{
		{"injection as a channel name", "channels:\n  \"x'; DROP TABLE effectd.channels; --\":\n" + hook, "channels.x'; DROP TABLE effectd.channels; --: line 2: a channel name is"},
		{"unknown key", "channels:\n  x:\n" + hook + "    retries: 3\n", "line 5: field retries not found"},
		{"wrong type", "channels:\n  x:\n" + hook + "    policy: {max_attempts: many}\n", "channels.x.policy"},
		{"negative duration", "channels:\n  x:\n" + hook + "    policy: {lease: -5s}\n", "channels.x.policy.lease"},
		{"huge max_payload", "channels:\n  x:\n" + hook + "    max_payload: 99999999999\n", "max_payload"},
		{"tab indentation", "channels:\n\tx: {}\n", "line 2"},
		{"not a map", "channels: [1, 2]\n", "line 1"},
		{"billion laughs", laughs + "channels:\n  x:\n" + hook, ""},
		{"1 MB of junk key", "channels:\n  x:\n" + hook + "    " + strings.Repeat("k", 1<<20) + ": 1\n", "line 5"},
		{"NUL byte", "channels:\n  x:\x00\n" + hook, ""},
		{"wrong type in a flow mapping", "channels:\n  x:\n" + hook + "    policy: {lease: 5s,\n      max_attempts: many}\n", "channels.x.policy.max_attempts: line 6"},
		{"unknown key in a flow mapping", "channels:\n  x:\n" + hook + "    policy: {lease: 5s,\n      leese: 5s}\n", "channels.x.policy: line 6: field leese not found"},
		{"NaN rate", "channels:\n  x:\n" + hook + "    policy: {rate_per_second: .nan}\n", "channels.x.policy.rate_per_second: line 5: must be a finite number"},
		{"infinite rate", "channels:\n  x:\n" + hook + "    policy:\n      rate_per_second: .inf\n", "channels.x.policy.rate_per_second: line 6: must be a finite number"},
		{"1 MB value", "channels:\n  x:\n" + hook + "    policy: {in_doubt: " + strings.Repeat("v", 1<<20) + "}\n", "channels.x.policy.in_doubt: line 5"},
		{"1 MB duration", "channels:\n  x:\n" + hook + "    policy: {lease: " + strings.Repeat("9", 1<<20) + "}\n", "channels.x.policy.lease: line 5"},
	}
	before := s.snapshot(t)
	for _, c := range cases {
		cfg := filepath.Join(dir, "bad.yaml")
		if err := os.WriteFile(cfg, []byte(c.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		var stdout, stderr bytes.Buffer
		env := map[string]string{"DATABASE_URL": s.dsn, "HOOK_SECRET": testSecret}
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		err := run(ctx, []string{"migrate", "--config", cfg}, mapEnv(env), &stdout, &stderr)
		cancel()
		code := exitCode(err, &stderr)
		msg := strings.TrimSpace(stderr.String())
		if code != 1 || !strings.Contains(msg, c.want) || msg == "" || strings.Count(msg, "\n") > 0 {
			t.Errorf("%s: exit %d, stderr %q; want exit 1 naming %q", c.name, code, truncateTail(msg, 300), c.want)
		}
		if len(msg) > 500 {
			t.Errorf("%s: the error is %d bytes long", c.name, len(msg))
		}
	}
	if after := s.snapshot(t); after != before {
		t.Errorf("a refused configuration changed the database")
	}
}

func truncateTail(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// TestAbuseAdminAPI: every admin route, given hostile filters, wrong types,
// unknown fields, huge bodies or a transition the state does not allow,
// answers the right status with a message naming the problem, and changes nothing.
func TestAbuseAdminAPI(t *testing.T) {
	t.Parallel()
	s := newStack(t, pgtest.URL(t))
	_, base := s.serve(t)
	ctx := context.Background()
	// A PENDING intent that is not due for an hour, and a SENT one.
	if _, err := s.pool.Exec(ctx, `SELECT effectd.enqueue(event_id => 'later', channel => 'hook', payload => '{}', not_before => now() + interval '1 hour')`); err != nil {
		t.Fatal(err)
	}
	s.enqueue(t, "done", "other", 0)
	poll(t, 10*time.Second, "the intent on other SENT", func() bool { return s.status(t, "done", "other") == "SENT" })
	var pending, sent int64
	s.pool.QueryRow(ctx, `SELECT id FROM effectd.intents WHERE event_id = 'later'`).Scan(&pending)
	s.pool.QueryRow(ctx, `SELECT id FROM effectd.intents WHERE event_id = 'done'`).Scan(&sent)

	q := url.QueryEscape
	huge := []byte(`{"reason":"` + strings.Repeat("x", 1<<20) + `"}`)
	nested := []byte(strings.Repeat(`{"as":`, 5000) + `"skip"` + strings.Repeat("}", 5000))
	in := func(id int64, action string) string { return fmt.Sprintf("/v1/intents/%d/%s", id, action) }
	cases := []struct {
		method, path, body string
		status             int
		want               string // in the error message
	}{
		{"GET", "/v1/intents?status=" + q(injectionOr), "", 422, "status"},
		{"GET", "/v1/intents?status=sent", "", 422, "status"},
		{"GET", "/v1/intents?after=" + q("1 OR 1=1"), "", 422, "after"},
		{"GET", "/v1/intents?channel=%00", "", 400, `"channel": must be UTF-8 text without NUL bytes`},
		{"GET", "/v1/intents?event_id=%FF%FE", "", 400, `"event_id": must be UTF-8`},
		{"GET", "/v1/channels/%FF", "", 400, "the path: must be UTF-8"},
		{"PATCH", "/v1/channels/a%00b/policy", `{"lease":"5s"}`, 400, "the path"},
		{"POST", "/v1/intents/1/reconcile?dry_run=%C3", "", 400, `"dry_run"`},
		{"GET", "/v1/intents?after=-1", "", 422, "after"},
		{"GET", "/v1/intents?limit=" + q(injectionUnion), "", 422, "limit"},
		{"GET", "/v1/intents?limit=100000", "", 422, "limit"},
		{"GET", "/v1/intents/" + q(injection), "", 400, "id"},
		{"GET", "/v1/intents/99999999999999999999", "", 400, "id"},
		{"GET", "/v1/intents/0", "", 400, "id"},
		{"GET", "/v1/intents/424242", "", 404, "not found"},
		{"GET", "/v1/channels/" + q(injectionOr), "", 404, "not found"},
		{"POST", in(pending, "retry"), "", 409, "PENDING"},
		{"POST", in(pending, "retry"), `{"reason":1}`, 400, "reason"},
		{"POST", in(pending, "retry"), `{"reason":"x","id":1}`, 400, "id"},
		{"POST", in(pending, "retry"), string(huge), 413, "body"},
		{"POST", in(sent, "cancel"), "", 409, "SENT"},
		{"POST", in(pending, "cancel"), `[]`, 400, "JSON object"},
		{"POST", in(pending, "cancel"), `{"reason":"` + strings.Repeat("r", 1001) + `"}`, 422, "reason"},
		{"POST", in(pending, "resolve"), `{"as":"skip"}`, 422, "reason"},
		{"POST", in(pending, "resolve"), `{"as":"skip","reason":"r"}`, 409, "PENDING"},
		{"POST", in(sent, "resolve"), `{"as":"sent","provider_ref":"re_1","reason":"r"}`, 409, "SENT"},
		{"POST", in(pending, "resolve"), `{"as":1}`, 400, "as"},
		{"POST", in(pending, "resolve"), `{"as":"sent"}`, 422, "provider_ref"},
		{"POST", in(pending, "resolve"), `{"as":"` + injection + `"}`, 422, "as"},
		{"POST", in(pending, "resolve"), `{"as":"skip","sql":"DROP TABLE"}`, 400, "sql"},
		{"POST", in(pending, "resolve"), `{"as":"skip"} {"as":"sent"}`, 400, "trailing"},
		{"POST", in(pending, "resolve"), string(nested), 400, ""},
		{"POST", in(pending, "resolve"), "", 400, "JSON object"},
		{"POST", in(pending, "reconcile") + "?dry_run=" + q(injectionOr), "", 422, "dry_run"},
		{"POST", "/v1/intents/" + q(injection) + "/cancel", "", 400, "id"},
		{"PATCH", "/v1/channels/hook/policy", `{"max_attempts":"many"}`, 422, "max_attempts"},
		{"PATCH", "/v1/channels/hook/policy", `{"lease":"-1s"}`, 422, "lease"},
		{"PATCH", "/v1/channels/hook/policy", `{"in_doubt":"` + injection + `"}`, 422, "in_doubt"},
		{"PATCH", "/v1/channels/hook/policy", `{"concurrency":1e400}`, 422, "concurrency"},
		{"PATCH", "/v1/channels/hook/policy", `{"bogus":1}`, 400, "bogus"},
		{"PATCH", "/v1/channels/hook/policy", `{}`, 422, "no policy field"},
		{"PATCH", "/v1/channels/hook/policy", `[{"lease":"1s"}]`, 400, "JSON object"},
		{"PATCH", "/v1/channels/hook/policy", string(huge), 413, "body"},
		{"PATCH", "/v1/channels/" + q(injection) + "/policy", `{"lease":"5s"}`, 404, "not found"},
		{"POST", "/v1/channels/" + q(injectionOr) + "/pause", "", 404, "not found"},
		{"POST", "/v1/channels/nope/resume", "", 404, "not found"},
		{"DELETE", "/v1/intents/1", "", 405, "method"},
		{"POST", in(pending, "cancel"), `{"reason":"a\u0000b"}`, 400, `field "reason" holds a \u0000`},
		{"POST", in(pending, "resolve"), `{"as":"sent","provider_ref":"re_\u0000"}`, 400, `field "provider_ref"`},
		{"POST", in(pending, "retry"), `{"reason":"\ud800"}`, 400, "unpaired surrogate"},
		{"POST", in(pending, "cancel"), "{\"reason\":\"\xff\xfe\"}", 400, "not UTF-8"},
		{"PATCH", "/v1/channels/hook/policy", `{"backoff":{"base":"\u0000"}}`, 400, `field "backoff.base"`},
		{"PUT", "/v1/channels/hook/policy", `{"lease":"5s"}`, 405, "method"},
	}
	before := s.snapshot(t)
	for _, c := range cases {
		var body []byte
		if c.body != "" {
			body = []byte(c.body)
		}
		code, b := do(t, c.method, base+c.path, adminToken, body)
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if err := json.Unmarshal(b, &e); err != nil || e.Error.Code == "" {
			t.Errorf("%s %s: %d, body %q is not the JSON error shape", c.method, truncateTail(c.path, 80), code, truncateTail(string(b), 200))
			continue
		}
		if code != c.status || !strings.Contains(e.Error.Message, c.want) {
			t.Errorf("%s %s %s: %d %q; want %d naming %q", c.method, truncateTail(c.path, 80), truncateTail(c.body, 60), code, e.Error.Message, c.status, c.want)
		}
	}
	// Filters are parameters, never SQL: hostile values match nothing.
	for _, f := range []string{"channel=" + q(injectionOr), "event_id=" + q(injection), "channel=" + q("hook' --")} {
		var page struct {
			Intents []json.RawMessage `json:"intents"`
		}
		if err := json.Unmarshal(mustDo(t, "GET", base+"/v1/intents?"+f, adminToken, nil, 200), &page); err != nil || len(page.Intents) != 0 {
			t.Errorf("GET /v1/intents?%s: %d intents, %v; want none", f, len(page.Intents), err)
		}
	}
	if after := s.snapshot(t); after != before {
		t.Errorf("refused requests changed the database")
	}

	// A 405 names the methods its route has (RFC 9110).
	req, _ := http.NewRequest("DELETE", base+"/v1/channels/hook/policy", nil)
	req.Header.Set("Authorization", "Bearer "+adminToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 405 || resp.Header.Get("Allow") != "PATCH" {
		t.Errorf("DELETE /v1/channels/hook/policy: %d, Allow %q; want 405, Allow PATCH", resp.StatusCode, resp.Header.Get("Allow"))
	}
	// A payload nested thousands deep (stored before enqueue bounded nesting)
	// is answered compact: not amplified to many MB by indentation.
	deep := `{"a":` + strings.Repeat("[", 3000) + strings.Repeat("]", 3000) + `}`
	deepID := fixture.Intent(t, s.pool, fixture.Event("deep"), fixture.Channel("hook"), fixture.Payload(deep),
		fixture.Status("CANCELLED"), fixture.Attempts(0)).ID
	for _, path := range []string{fmt.Sprintf("/v1/intents/%d", deepID), "/v1/intents?limit=1000"} {
		if b := mustDo(t, "GET", base+path, adminToken, nil, 200); len(b) > 4*len(deep)+64<<10 {
			t.Errorf("GET %s: %d bytes for a %d-byte payload", path, len(b), len(deep))
		}
	}
}

// TestAbusePoisonRows: rows that hold what effectd.enqueue now refuses (from
// before that check, or written straight into the table) never stop their
// neighbours. The claim that takes them with good rows sends the good ones and
// quarantines each bad one (FAILED, not called, last_error saying why), and
// the admin API lists and shows every row, naming the times it cannot carry.
func TestAbusePoisonRows(t *testing.T) {
	t.Parallel()
	s := newStack(t, pgtest.URL(t))
	ctx := context.Background()
	s.enqueue(t, "good-1", "hook", 0)
	poison := []struct{ event, occurred, next, want string }{
		{"occurred-infinity", "'infinity'", "now()", "occurred_at is infinity"},
		{"occurred-year-12000", "'12000-01-01'", "now()", "occurred_at is past the year 9999"},
		{"ws-1\r\nX-Injected: 1", "NULL", "now()", "idempotency_key has a control character"},
		{"ws-2 ", "NULL", "now()", "idempotency_key begins or ends with white space"},
	}
	for _, p := range poison {
		if _, err := s.pool.Exec(ctx, `
INSERT INTO effectd.intents (event_id, channel, payload, idempotency_key, occurred_at, next_attempt_at)
VALUES ($1, 'hook', '{}', 'hook:' || $1, `+p.occurred+`::timestamptz, `+p.next+`)`, p.event); err != nil {
			t.Fatal(err)
		}
	}
	// Never due, and not listable by today's code.
	for _, p := range []struct{ event, next string }{{"next-infinity", "infinity"}, {"next-year-12000", "12000-01-01"}} {
		if _, err := s.pool.Exec(ctx, `
INSERT INTO effectd.intents (event_id, channel, payload, idempotency_key, next_attempt_at)
VALUES ($1, 'hook', '{}', 'hook:' || $1, $2::timestamptz)`, p.event, p.next); err != nil {
			t.Fatal(err)
		}
	}
	s.enqueue(t, "good-2", "hook", 0)
	_, base := s.serve(t)

	poll(t, 60*time.Second, "the good intents SENT and the poison ones FAILED", func() bool {
		for _, e := range []string{"good-1", "good-2"} {
			if s.status(t, e, "hook") != "SENT" {
				return false
			}
		}
		for _, p := range poison {
			if s.status(t, p.event, "hook") != "FAILED" {
				return false
			}
		}
		return true
	})
	for _, p := range poison {
		var lastErr string
		var calls int
		s.pool.QueryRow(ctx, `SELECT i.last_error, (SELECT count(*) FROM effectd.attempts a WHERE a.intent_id = i.id AND a.outcome <> 'quarantined')
FROM effectd.intents i WHERE event_id = $1`, p.event).Scan(&lastErr, &calls)
		if !strings.Contains(lastErr, "quarantined") || !strings.Contains(lastErr, p.want) || calls != 0 {
			t.Errorf("%q: last_error %q, %d provider attempts; want quarantined naming %q, not called", p.event, lastErr, calls, p.want)
		}
	}

	// Every row can be listed and shown.
	var page struct {
		Intents []struct {
			ID            int64    `json:"id"`
			EventID       string   `json:"event_id"`
			NextAttemptAt string   `json:"next_attempt_at"`
			Problems      []string `json:"problems"`
		} `json:"intents"`
	}
	if err := json.Unmarshal(mustDo(t, "GET", base+"/v1/intents?limit=100", adminToken, nil, 200), &page); err != nil {
		t.Fatal(err)
	}
	if len(page.Intents) != 8 {
		t.Errorf("GET /v1/intents: %d intents, want 8", len(page.Intents))
	}
	named := map[string]string{"next-infinity": "next_attempt_at is infinity", "next-year-12000": "next_attempt_at is past the year 9999",
		"occurred-infinity": "occurred_at is infinity", "occurred-year-12000": "occurred_at is past the year 9999", "good-1": ""}
	for _, in := range page.Intents {
		want, ok := named[in.EventID]
		if !ok {
			continue
		}
		if got := strings.Join(in.Problems, "; "); (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("%q: problems %q, want naming %q", in.EventID, got, want)
		}
		mustDo(t, "GET", fmt.Sprintf("%s/v1/intents/%d", base, in.ID), adminToken, nil, 200)
	}
	// A never-due row is not stuck out of reach: the operator can cancel it.
	for _, in := range page.Intents {
		if in.EventID == "next-infinity" {
			mustDo(t, "POST", fmt.Sprintf("%s/v1/intents/%d/cancel", base, in.ID), adminToken, nil, 200)
		}
	}
	// A PENDING row due since -infinity (held in a paused channel) leaves the
	// gauges readable.
	mustDo(t, "POST", base+"/v1/channels/other/pause", adminToken, nil, 200)
	if _, err := s.pool.Exec(ctx, `
INSERT INTO effectd.intents (event_id, channel, payload, idempotency_key, next_attempt_at)
VALUES ('due-minus-infinity', 'other', '{}', 'other:due-minus-infinity', '-infinity')`); err != nil {
		t.Fatal(err)
	}
	mustDo(t, "GET", base+"/v1/stats", adminToken, nil, 200)
	mustDo(t, "GET", base+"/metrics", adminToken, nil, 200)
}
