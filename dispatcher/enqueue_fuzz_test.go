package dispatcher_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math/big"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/policy"
)

// FuzzEnqueue feeds arbitrary event ids, channels and payloads to
// dispatcher.Enqueue against a real database. Every call either inserts
// exactly one row (or reports a duplicate of one), or is refused as bad input
// (SQLSTATE 22023, an *InputError naming the field) and inserts nothing. Any
// other error class — an encoding error, a cast error, a 500 in waiting — fails.
// An accepted input must have been valid (a known channel, a JSON object, an
// event id of 1 to 255 bytes of UTF-8 without NUL), be stored as given under
// its derived key, and be refused as a duplicate the second time.
//
// Each input runs in a transaction that is rolled back, so the table starts
// empty every time; plain go test runs the seeds in testdata/fuzz/FuzzEnqueue.
func FuzzEnqueue(f *testing.F) {
	seeds := []struct{ event, channel, payload string }{
		{"evt-1", "hook", `{"a":1}`},
		{"evt-1", "sms", `{"to":"+15005550006","body":"hi"}`},
		{"evt-1", "refund", `{"type":"refund","payment_intent":"pi_1","amount":5}`},
		{"", "hook", `{}`},
		{"evt", "nope", `{}`},
		{"evt", "hook", `[1,2]`},
		{"evt", "hook", `not json`},
		{"evt", "refund", `{"type":"refund","payment_intent":"pi_1","amount":0.5}`},
		{"'; DROP TABLE effectd.intents; --", "hook' OR '1'='1", `{"x":"'); DELETE FROM effectd.intents; --"}`},
	}
	for _, s := range seeds {
		f.Add(s.event, s.channel, []byte(s.payload))
	}
	pool := pgtest.New(f)
	var chans []dispatcher.Channel
	for name, kind := range map[string]string{"hook": "webhook", "refund": "stripe", "sms": "twilio"} {
		chans = append(chans, dispatcher.Channel{Name: name, Kind: kind, Policy: policy.Default(kind)})
	}
	if err := dispatcher.Register(context.Background(), pool, chans); err != nil {
		f.Fatal(err)
	}
	ctx := context.Background()
	f.Fuzz(func(t *testing.T, eventID, channel string, payload []byte) {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer tx.Rollback(ctx)
		sp, err := tx.Begin(ctx) // a savepoint: the outer transaction survives a refusal
		if err != nil {
			t.Fatal(err)
		}
		inserted, err := dispatcher.Enqueue(ctx, sp, dispatcher.Intent{EventID: eventID, Channel: channel, Payload: payload})
		if err != nil {
			var bad *dispatcher.InputError
			if !errors.As(err, &bad) || bad.Field == "" {
				t.Fatalf("Enqueue(%q, %q, %q): %v (%s); want an *InputError naming the field", eventID, channel, payload, err, sqlstate(err))
			}
			var pgErr *pgconn.PgError
			if errors.As(err, &pgErr) && pgErr.Code != "22023" && bad.Field != "payload" {
				t.Fatalf("Enqueue(%q, %q, %q): SQLSTATE %s on %s, want 22023", eventID, channel, payload, pgErr.Code, bad.Field)
			}
			if err := sp.Rollback(ctx); err != nil {
				t.Fatal(err)
			}
		} else if !inserted {
			t.Fatalf("Enqueue(%q, %q, %q) into an empty table reported a duplicate", eventID, channel, payload)
		} else {
			checkStored(t, sp, eventID, channel, payload)
		}
		var n int
		if err := tx.QueryRow(ctx, `SELECT count(*) FROM effectd.intents`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		if want := map[bool]int{true: 1, false: 0}[err == nil]; n != want {
			t.Fatalf("Enqueue(%q, %q, %q) = %v: %d rows, want %d", eventID, channel, payload, err, n, want)
		}
	})
}

// sqlstate returns err's SQLSTATE, or "no SQLSTATE".
func sqlstate(err error) string {
	var pgErr *pgconn.PgError
	if errors.As(err, &pgErr) {
		return "SQLSTATE " + pgErr.Code
	}
	return "no SQLSTATE"
}

// checkStored checks an accepted input against what the contract allows and
// against the row it left: the same event, channel and payload (as JSON
// values), the key derived from them, PENDING; and a second enqueue of it is
// a duplicate that changes nothing.
func checkStored(t *testing.T, tx dispatcher.Tx, eventID, channel string, payload []byte) {
	t.Helper()
	ctx := context.Background()
	want, err := jsonValue(payload)
	switch _, object := want.(map[string]any); {
	case channel != "hook" && channel != "refund" && channel != "sms":
		t.Fatalf("accepted unknown channel %q", channel)
	case eventID == "" || len(eventID) > 255 || !utf8.ValidString(eventID) || strings.ContainsRune(eventID, 0):
		t.Fatalf("accepted event id %q (%d bytes)", eventID, len(eventID))
	case err != nil || !object:
		t.Fatalf("accepted payload %q, which is not a JSON object (%v)", payload, err)
	}
	var gotEvent, gotChannel, key, status string
	var gotPayload []byte
	if err := tx.QueryRow(ctx, `SELECT event_id, channel, payload::text, idempotency_key, status FROM effectd.intents`).
		Scan(&gotEvent, &gotChannel, &gotPayload, &key, &status); err != nil {
		t.Fatal(err)
	}
	got, err := jsonValue(gotPayload)
	if err != nil {
		t.Fatal(err)
	}
	if gotEvent != eventID || gotChannel != channel || status != "PENDING" || !reflect.DeepEqual(got, want) {
		t.Fatalf("Enqueue(%q, %q, %q) stored (%q, %q, %s, %s)", eventID, channel, payload, gotEvent, gotChannel, gotPayload, status)
	}
	wantKey := channel + ":" + eventID
	if len(wantKey) > 255 {
		sum := sha256.Sum256([]byte(eventID))
		wantKey = channel + ":sha256:" + hex.EncodeToString(sum[:])
	}
	if key != wantKey {
		t.Fatalf("Enqueue(%q, %q): key %q, want %q", eventID, channel, key, wantKey)
	}
	again, err := dispatcher.Enqueue(ctx, tx, dispatcher.Intent{EventID: eventID, Channel: channel, Payload: bytes.Clone(payload)})
	if err != nil || again {
		t.Fatalf("Enqueue(%q, %q) again = %v, %v; want a duplicate", eventID, channel, again, err)
	}
}

// jsonValue decodes one JSON value with its numbers as exact fractions, so
// that a value and jsonb's rendering of it (1e2 as 100, 1.50 kept) compare
// equal exactly when they are the same number.
func jsonValue(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	var exact func(v any) any
	exact = func(v any) any {
		switch x := v.(type) {
		case map[string]any:
			for k, e := range x {
				x[k] = exact(e)
			}
		case []any:
			for i, e := range x {
				x[i] = exact(e)
			}
		case json.Number:
			if r, ok := new(big.Rat).SetString(string(x)); ok {
				return r.RatString()
			}
		}
		return v
	}
	return exact(v), nil
}
