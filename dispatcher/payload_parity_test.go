package dispatcher_test

import (
	"context"
	"encoding/json"
	"errors"
	"regexp"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/policy"
	"github.com/effectd/effectd/providers/stripe"
	"github.com/effectd/effectd/providers/twilio"
)

// payloadCases is the one table of payload shapes that effectd.enqueue's SQL
// rules and the Go senders' Validate must judge alike: field is the field both
// name when they refuse, "" when both accept.
var payloadCases = []struct {
	channel, payload, field string
}{
	// Stripe refunds.
	{"refund", `{"type":"refund","payment_intent":"pi_123","amount":500,"reason":"requested_by_customer"}`, ""},
	{"refund", `{"type":"refund","charge":"ch_123"}`, ""},
	{"refund", `{"type":"refund","charge":"ch_123","amount":null,"reason":null}`, ""},
	{"refund", `{"type":"refund","payment_intent":"pi_1","amount":1e3}`, ""}, // jsonb stores 1000
	{"refund", `{"type":"refund","payment_intent":"pi_1","amount":9223372036854775807}`, ""},
	{"refund", `{"type":"refund"}`, "payload.payment_intent"},
	{"refund", `{"type":"refund","payment_intent":null}`, "payload.payment_intent"},
	{"refund", `{"type":"refund","payment_intent":5}`, "payload.payment_intent"},
	{"refund", `{"type":"refund","payment_intent":""}`, "payload.payment_intent"},
	{"refund", `{"type":"refund","payment_intent":"pi 1"}`, "payload.payment_intent"},
	{"refund", `{"type":"refund","charge":"ch_1","amount":0}`, "payload.amount"},
	{"refund", `{"type":"refund","charge":"ch_1","amount":-5}`, "payload.amount"},
	{"refund", `{"type":"refund","charge":"ch_1","amount":1.0}`, "payload.amount"},
	{"refund", `{"type":"refund","charge":"ch_1","amount":1.5}`, "payload.amount"},
	{"refund", `{"type":"refund","charge":"ch_1","amount":1e30}`, "payload.amount"},
	{"refund", `{"type":"refund","charge":"ch_1","amount":9223372036854775808}`, "payload.amount"},
	{"refund", `{"type":"refund","charge":"ch_1","amount":"5"}`, "payload.amount"},
	{"refund", `{"type":"refund","charge":"ch_1","reason":"because"}`, "payload.reason"},
	{"refund", `{"type":"refund","charge":"ch_1","metadata":{"a":"b"}}`, "payload.metadata"},
	{"refund", `{"type":"refund","charge":"ch_1","AMOUNT":5}`, "payload.AMOUNT"},
	{"refund", `{"type":"refund","charge":"ch_1","currency":"usd"}`, "payload.currency"},
	// Stripe payment intents and transfers.
	{"refund", `{"type":"payment_intent","amount":1200,"currency":"usd","customer":"cus_1","payment_method":"pm_card_visa","confirm":true,"off_session":false}`, ""},
	{"refund", `{"type":"payment_intent","amount":1200,"currency":"EUR"}`, ""},
	{"refund", `{"type":"payment_intent","amount":1200}`, "payload.currency"},
	{"refund", `{"type":"payment_intent","currency":"usd"}`, "payload.amount"},
	{"refund", `{"type":"payment_intent","amount":1200,"currency":"dollars"}`, "payload.currency"},
	{"refund", `{"type":"payment_intent","amount":1200,"currency":"u$d"}`, "payload.currency"},
	{"refund", `{"type":"payment_intent","amount":1200,"currency":"usd","confirm":"yes"}`, "payload.confirm"},
	{"refund", `{"type":"payment_intent","amount":1200,"currency":"usd","customer":""}`, "payload.customer"},
	{"refund", `{"type":"payment_intent","amount":1200,"currency":"usd","destination":"acct_1"}`, "payload.destination"},
	{"refund", `{"type":"transfer","amount":700,"currency":"usd","destination":"acct_123"}`, ""},
	{"refund", `{"type":"transfer","amount":700,"currency":"usd"}`, "payload.destination"},
	{"refund", `{"type":"transfer","amount":700,"currency":"usd","destination":"acct_1","reason":"duplicate"}`, "payload.reason"},
	{"refund", `{"type":"payout","amount":1}`, "payload.type"},
	{"refund", `{"type":""}`, "payload.type"},
	{"refund", `{"type":1}`, "payload.type"},
	{"refund", `{"amount":5}`, "payload.type"},
	{"refund", `{"type":null,"charge":"ch_1"}`, "payload.type"},
	// Twilio SMS.
	{"sms", `{"to":"+15005550006","body":"hi"}`, ""},
	{"sms", `{"to":"+15005550006","body":"line one\nline two","from":"+15005550006"}`, ""},
	{"sms", `{"to":"+15005550006","body":"hi","from":"ACME Corp"}`, ""},
	{"sms", `{"to":"+15005550006","body":"hi","from":"12345"}`, ""},
	{"sms", `{"to":"+15005550006","body":"hi","from":null}`, ""},
	{"sms", `{"to":"+15005550006","body":"` + strings.Repeat("é", 1600) + `"}`, ""},
	{"sms", `{"to":"+15005550006","body":"` + strings.Repeat("é", 1601) + `"}`, "payload.body"},
	{"sms", `{"to":"hello","body":"hi"}`, "payload.to"},
	{"sms", `{"to":"15005550006","body":"hi"}`, "payload.to"},
	{"sms", `{"to":"+1500","body":"hi"}`, "payload.to"},
	{"sms", `{"to":"+15005550006 ","body":"hi"}`, "payload.to"},
	{"sms", `{"to":15005550006,"body":"hi"}`, "payload.to"},
	{"sms", `{"body":"hi"}`, "payload.to"},
	{"sms", `{"to":"+15005550006"}`, "payload.body"},
	{"sms", `{"to":"+15005550006","body":""}`, "payload.body"},
	{"sms", `{"to":"+15005550006","body":["hi"]}`, "payload.body"},
	{"sms", `{"to":"+15005550006","body":"hi","from":"+1"}`, "payload.from"},
	{"sms", `{"to":"+15005550006","body":"hi","from":"ACME Corporation"}`, "payload.from"},
	{"sms", `{"to":"+15005550006","body":"hi","media_url":"https://x"}`, "payload.media_url"},
	{"sms", `{"To":"+15005550006","body":"hi"}`, "payload.To"},
	// Not an object at all.
	{"sms", `[]`, "payload"},
	{"refund", `"x"`, "payload"},
}

// TestPayloadParity runs every payload of payloadCases through effectd.enqueue
// and through the channel's Go sender, and requires both to give the table's verdict.
func TestPayloadParity(t *testing.T) {
	t.Parallel()
	j := newJudge(t)
	for _, c := range payloadCases {
		v, ok := j.judge(t, c.channel, []byte(c.payload))
		if !ok {
			t.Errorf("%s %s: PostgreSQL cannot store it at all", c.channel, c.payload)
			continue
		}
		if v.sql != c.field || v.sender != c.field {
			t.Errorf("%s %s:\n  enqueue refuses %q (%s)\n  sender  refuses %q (%s)\n  want %q", c.channel, trunc(c.payload),
				v.sql, v.sqlErr, v.sender, v.senderErr, c.field)
		}
	}
}

// FuzzPayloadParity looks for a payload that effectd.enqueue accepts and the
// channel's Go sender refuses, or the other way round. The sender judges the
// payload as the database stores and returns it (jsonb normalises numbers and
// keeps the last of repeated keys); input PostgreSQL cannot store is skipped.
func FuzzPayloadParity(f *testing.F) {
	for _, c := range payloadCases {
		f.Add(c.channel == "sms", []byte(c.payload))
	}
	j := newJudge(f)
	f.Fuzz(func(t *testing.T, sms bool, payload []byte) {
		channel := map[bool]string{true: "sms", false: "refund"}[sms]
		v, ok := j.judge(t, channel, payload)
		if !ok {
			return
		}
		if (v.sql == "") != (v.sender == "") {
			t.Fatalf("%s %q (stored as %s):\n  enqueue: %s\n  sender:  %s", channel, payload, v.stored, or(v.sqlErr, "accepted"), or(v.senderErr, "accepted"))
		}
	})
}

// FuzzPayloadFieldsParity is FuzzPayloadParity on payloads built field by
// field: three keys, each with a value written as raw JSON (or, when it is not
// JSON, as a string), so that mutations stay near the shapes the rules know.
func FuzzPayloadFieldsParity(f *testing.F) {
	seeds := []struct {
		sms                    bool
		k1, v1, k2, v2, k3, v3 string
	}{
		{false, "type", `"refund"`, "payment_intent", `"pi_1"`, "amount", `500`},
		{false, "type", `"refund"`, "charge", `"ch_1"`, "reason", `"duplicate"`},
		{false, "type", `"payment_intent"`, "amount", `1200`, "currency", `"usd"`},
		{false, "type", `"transfer"`, "amount", `7e2`, "destination", `"acct_1"`},
		{false, "type", `"payment_intent"`, "amount", `1.0`, "confirm", `true`},
		{true, "to", `"+15005550006"`, "body", `"hi"`, "from", `"ACME"`},
		{true, "to", `"+15005550006"`, "body", `"hi"`, "from", `null`},
		{true, "to", `"hello"`, "body", `""`, "media_url", `"x"`},
	}
	for _, s := range seeds {
		f.Add(s.sms, s.k1, s.v1, s.k2, s.v2, s.k3, s.v3)
	}
	j := newJudge(f)
	f.Fuzz(func(t *testing.T, sms bool, k1, v1, k2, v2, k3, v3 string) {
		obj := map[string]json.RawMessage{}
		for _, kv := range [][2]string{{k1, v1}, {k2, v2}, {k3, v3}} {
			v := json.RawMessage(kv[1])
			if !json.Valid(v) {
				v, _ = json.Marshal(kv[1])
			}
			obj[kv[0]] = v
		}
		payload, err := json.Marshal(obj)
		if err != nil {
			return // a key or value Go cannot write as JSON
		}
		channel := map[bool]string{true: "sms", false: "refund"}[sms]
		v, ok := j.judge(t, channel, payload)
		if !ok {
			return
		}
		if (v.sql == "") != (v.sender == "") {
			t.Fatalf("%s %s (stored as %s):\n  enqueue: %s\n  sender:  %s", channel, payload, v.stored, or(v.sqlErr, "accepted"), or(v.senderErr, "accepted"))
		}
	})
}

// judge holds a database with a Stripe and a Twilio channel, and their senders.
type judge struct {
	pool    *pgxpool.Pool
	senders map[string]interface{ Validate(json.RawMessage) error }
}

func newJudge(tb testing.TB) *judge {
	pool := pgtest.New(tb)
	ctx := context.Background()
	err := dispatcher.Register(ctx, pool, []dispatcher.Channel{
		{Name: "refund", Kind: "stripe", Policy: policy.Default("stripe")},
		{Name: "sms", Kind: "twilio", Policy: policy.Default("twilio")},
	})
	if err != nil {
		tb.Fatal(err)
	}
	sp, err := stripe.New(stripe.Config{APIKey: "sk_test_x"})
	if err != nil {
		tb.Fatal(err)
	}
	tp, err := twilio.New(twilio.Config{AccountSID: "AC" + strings.Repeat("0", 32), AuthToken: "secret", From: "+15005550006"})
	if err != nil {
		tb.Fatal(err)
	}
	return &judge{pool: pool, senders: map[string]interface{ Validate(json.RawMessage) error }{"refund": sp, "sms": tp}}
}

// verdict is what each side refuses: the field it names, "" when it accepts.
type verdict struct {
	sql, sender       string
	sqlErr, senderErr string
	stored            string // the payload as the database returns it
}

// fieldOf finds the field an error message names: payload or payload.<field>.
var fieldOf = regexp.MustCompile(`payload(\.[^:]*)?:`)

// judge asks effectd.enqueue (in a transaction rolled back) and the channel's
// sender. ok is false when PostgreSQL cannot store payload as jsonb at all.
func (j *judge) judge(tb testing.TB, channel string, payload []byte) (v verdict, ok bool) {
	tb.Helper()
	ctx := context.Background()
	if err := j.pool.QueryRow(ctx, `SELECT $1::jsonb::text`, string(payload)).Scan(&v.stored); err != nil {
		var pgErr *pgconn.PgError
		if !errors.As(err, &pgErr) {
			tb.Fatal(err)
		}
		return v, false
	}
	tx, err := j.pool.Begin(ctx)
	if err != nil {
		tb.Fatal(err)
	}
	defer tx.Rollback(ctx)
	var inserted bool
	err = tx.QueryRow(ctx, `SELECT effectd.enqueue('parity', $1, $2::jsonb)`, channel, v.stored).Scan(&inserted)
	var pgErr *pgconn.PgError
	switch {
	case err == nil:
	case errors.As(err, &pgErr) && pgErr.Code == "22023":
		v.sql, v.sqlErr = pgErr.ColumnName, pgErr.Message
	default:
		tb.Fatalf("enqueue(%s, %s): %v", channel, trunc(v.stored), err)
	}
	if err := j.senders[channel].Validate(json.RawMessage(v.stored)); err != nil {
		v.senderErr = err.Error()
		v.sender = strings.TrimSuffix(fieldOf.FindString(v.senderErr), ":")
		if v.sender == "" {
			v.sender = "(no field named)"
		}
	}
	return v, true
}

func trunc(s string) string {
	if len(s) > 120 {
		return s[:120] + "…"
	}
	return s
}

func or(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
