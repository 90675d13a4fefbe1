package dispatcher_test

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/effectdtype"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/operator"
	"github.com/effectd/effectd/statemachine"
)

// notifications returns the notifications on channel hook, oldest first, as
// type → the source intent they embed.
func (r eventRig) notifications(t *testing.T) map[string]map[string]any {
	t.Helper()
	rows, err := r.pool.Query(context.Background(), `SELECT payload FROM effectd.intents WHERE channel = 'hook' ORDER BY id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	out := map[string]map[string]any{}
	for rows.Next() {
		var p struct {
			Type   string         `json:"type"`
			Intent map[string]any `json:"intent"`
		}
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			t.Fatal(err)
		}
		if err := json.Unmarshal(raw, &p); err != nil {
			t.Fatal(err)
		}
		out[p.Type] = p.Intent
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestNotifySentCarriesDelivery: effect.sent tells the delivery that SENT
// implies (accepted at least, or what the settling event said), whichever
// way the intent reached SENT: the worker's completion, a provider event that
// arrived first, or an operator's resolve.
func TestNotifySentCarriesDelivery(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	for _, tc := range []struct {
		name   string
		settle func(r eventRig, id int64)
		want   string
	}{
		{"twilio sent callback first", func(r eventRig, id int64) {
			r.record(t, twilioEvent(id, "e1", "SM1", "sent", statemachine.Accepted, ""))
		}, "accepted"},
		{"twilio delivered callback first", func(r eventRig, id int64) {
			r.record(t, twilioEvent(id, "e1", "SM1", "delivered", statemachine.Delivered, ""))
		}, "delivered"},
		{"event that says nothing of delivery", func(r eventRig, id int64) {
			r.record(t, twilioEvent(id, "e1", "SM1", "sending", statemachine.Unknown, ""))
		}, "accepted"},
		{"operator resolve", func(r eventRig, id int64) {
			if _, err := r.pool.Exec(ctx, `UPDATE effectd.intents SET status = 'IN_DOUBT', lease_expires_at = NULL WHERE id = $1`, id); err != nil {
				t.Fatal(err)
			}
			if _, _, err := operator.New(r.pool, storeOf(r.pool, effectdtype.SingleNode)).Operate(ctx, operator.Operation{IntentID: id, Event: statemachine.ResolveSent,
				Actor: "ops", ProviderRef: "SM1", Reason: "seen in the Twilio console"}); err != nil {
				t.Fatal(err)
			}
		}, "accepted"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newEventRig(t, &dispatcher.Notify{Channel: "hook", On: []string{"sent"}})
			id := r.insert(t, "e1", "SENDING", "", "")
			tc.settle(r, id)
			s := r.state(t, id)
			if s.Status != "SENT" || s.Delivery != tc.want {
				t.Fatalf("intent: %+v, want SENT with delivery %s", s, tc.want)
			}
			sent := r.notifications(t)["effect.sent"]
			if sent == nil || sent["delivery"] != tc.want {
				t.Fatalf("effect.sent embeds %v, want delivery %q as the intent has it", sent, tc.want)
			}
		})
	}
}

// TestNotifyMasksRedactedValues: a notification copies its source's
// last_error with the value of each field the source channel redacts masked,
// so no reader of the notify channel (its viewers, its receiver, the logs of
// its calls) sees what a viewer of the source may not.
func TestNotifyMasksRedactedValues(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newEventRig(t, &dispatcher.Notify{Channel: "hook", On: []string{"failed"}})
	if _, err := r.pool.Exec(ctx, `UPDATE effectd.channels SET redact = '{to,body}' WHERE name = 'sms'`); err != nil {
		t.Fatal(err)
	}
	id := r.insert(t, "e1", "SENDING", "", "")
	const text = "twilio 21211: The 'To' number +15005550006 is not a valid phone number (hi)"
	if _, err := r.pool.Exec(ctx, `UPDATE effectd.intents SET status = 'FAILED', last_error = $2 WHERE id = $1`, id, text); err != nil {
		t.Fatal(err)
	}
	failed := r.notifications(t)["effect.failed"]
	want := "twilio 21211: The 'To' number *** is not a valid phone number (hi)" // "hi" is under 3 bytes: not searched for
	if failed == nil || failed["last_error"] != want {
		t.Fatalf("effect.failed embeds %v, want last_error %q", failed, want)
	}
	var payload string
	r.pool.QueryRow(ctx, `SELECT payload::text FROM effectd.intents WHERE channel = 'hook'`).Scan(&payload)
	if strings.Contains(payload, "5005550006") {
		t.Fatalf("the notification holds the redacted number: %s", payload)
	}
}

// redactCases are texts, payloads and redacted fields that
// dispatcher.RedactText and effectd.redact_text must mask alike.
var redactCases = []struct{ text, payload, fields string }{
	{"The 'To' number +15005550006 is not valid", `{"to":"+15005550006","body":"hi"}`, "to,body"},
	{"body hi and hello and hello", `{"to":"x","body":"hello"}`, "body"},
	{`sent {"body":"quote \" inside"}`, `{"body":"quote \" inside"}`, "body"},
	{`amount 12345 of 12345.5`, `{"amount":12345}`, "amount"},
	{`meta {"a": 1, "b": [true, null]}`, `{"meta":{"a":1,"b":[true,null]}}`, "meta"},
	{`value null and true`, `{"x":null,"y":true}`, "x,y"},
	{`nothing to mask`, `{"to":"+1555"}`, ""},
	{`unknown field`, `{"to":"+1555"}`, "from"},
	{`über ünïcode ✓ text`, `{"name":"ünïcode ✓"}`, "name"},
	{`overlap aaaa`, `{"a":"aaa","b":"aa"}`, "b,a"},
	{`an emoji 😀😀 here`, `{"e":"😀"}`, "e"},
	{``, `{"to":"+1555"}`, "to"},
	{`tab	and "quotes"`, `{"q":"\"quotes\"","t":"tab\t"}`, "q,t"},
}

// TestRedactTextMatchesSQL: the notify trigger masks a copied error with
// effectd.redact_text, the admin API masks the source's with
// dispatcher.RedactText; both give the same text.
func TestRedactTextMatchesSQL(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	for _, c := range redactCases {
		checkRedactParity(t, pool, c.text, c.payload, c.fields)
	}
}

// FuzzRedactTextMatchesSQL is TestRedactTextMatchesSQL over generated input.
func FuzzRedactTextMatchesSQL(f *testing.F) {
	for _, c := range redactCases {
		f.Add(c.text, c.payload, c.fields)
	}
	pool := pgtest.New(f)
	f.Fuzz(func(t *testing.T, text, payload, fields string) {
		var obj map[string]json.RawMessage
		if json.Unmarshal([]byte(payload), &obj) != nil || !utf8.ValidString(text) || !utf8.ValidString(fields) || strings.ContainsRune(text+fields, 0) {
			t.Skip("not a JSON object, or text that PostgreSQL cannot hold")
		}
		checkRedactParity(t, pool, text, payload, fields)
	})
}

func checkRedactParity(t *testing.T, pool *pgxpool.Pool, text, payload, fields string) {
	t.Helper()
	var names []string
	if fields != "" {
		names = strings.Split(fields, ",")
	}
	// Go masks the payload as it reads it from the database: jsonb's own text.
	ctx := context.Background()
	var stored []byte
	if err := pool.QueryRow(ctx, `SELECT $1::jsonb::text`, payload).Scan(&stored); err != nil {
		t.Skipf("not storable: %v", err)
	}
	var sql string
	if err := pool.QueryRow(ctx, `SELECT effectd.redact_text($1, $2::jsonb, $3)`, text, stored, names).Scan(&sql); err != nil {
		t.Fatal(err)
	}
	if got := dispatcher.RedactText(text, stored, names); got != sql {
		t.Errorf("RedactText(%q, %s, %q) = %q; effectd.redact_text = %q", text, stored, names, got, sql)
	}
}

// echoingReceiver is a webhook receiver that refuses every notice and quotes
// the body it got in its answer, as many do.
type echoingReceiver struct{}

func (echoingReceiver) Send(_ context.Context, _ string, payload json.RawMessage, _ map[string]string) (string, error) {
	return "", quotingErr{"webhook answered 400: invalid body " + string(payload)}
}

// TestNotificationCallRevealsNoSource: the notify channel's own call of a
// notification, refused with an answer that quotes the body, logs and stores
// nothing of what the source channel redacts.
func TestNotificationCallRevealsNoSource(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	var mu sync.Mutex
	var logs bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&lockedBuffer{mu: &mu, b: &logs}, nil))
	chans := []dispatcher.Channel{
		{Name: "sms", Kind: "twilio", Provider: quotingProvider{}, Policy: fastPolicy("twilio"), Redact: []string{"to", "body"},
			Notify: &dispatcher.Notify{Channel: "hook", On: []string{"failed"}}},
		{Name: "hook", Kind: "webhook", Provider: echoingReceiver{}, Policy: fastPolicy("webhook")},
	}
	r := rig{pool: pool, d: run(t, pool, dispatcher.Config{Channels: chans, Logger: log})}
	if ok, err := enqueue(t, pool, dispatcher.Intent{EventID: "otp", Channel: "sms", Payload: `{"to":"+15558675309","body":"code 424242"}`}); err != nil || !ok {
		t.Fatalf("enqueue: %v %v", ok, err)
	}
	r.waitStatus(t, "otp", "FAILED")
	notice := r.waitStatus(t, "sms:otp:failed", "FAILED")
	if !strings.Contains(notice.LastError, "invalid body") {
		t.Fatalf("the notice's last_error %q: want the receiver's answer", notice.LastError)
	}
	// the failed call's line is written once its outcome is: after the
	// status this test waited for, not before
	eventually(t, 5*time.Second, "the log line of the notice's failed call", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return strings.Contains(logs.String(), `"channel":"hook"`)
	})
	mu.Lock()
	defer mu.Unlock()
	var stored string
	pool.QueryRow(context.Background(), `SELECT string_agg(i.payload::text || coalesce(i.last_error, '') || coalesce(a.error, ''), ' ')
		FROM effectd.intents i LEFT JOIN effectd.attempts a ON a.intent_id = i.id WHERE i.channel = 'hook'`).Scan(&stored)
	for what, text := range map[string]string{"logs": logs.String(), "the notice, its error and its attempts": stored} {
		if strings.Contains(text, "5558675309") || strings.Contains(text, "424242") {
			t.Errorf("%s reveal what sms redacts: %s", what, text)
		}
	}
}
