package dispatcher_test

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/policy"
	"github.com/effectd/effectd/statemachine"
)

// failingPoll is polled whose polls fail while fail is set, with an error
// that quotes the payload as a provider's may.
type failingPoll struct {
	*polled
	fail atomic.Bool
}

func (p *failingPoll) Poll(ctx context.Context, ref string) (status, delivery, detail string, reversal bool, err error) {
	if p.fail.Load() {
		return "", "", "", false, errors.New("twilio 503 for +15005550006")
	}
	return p.polled.Poll(ctx, ref)
}

// TestPollSpans: each delivery poll is a client span in the intent's trace,
// a child of the producer's span as the attempts are, naming the channel,
// the intent, its event id, the provider, the delivery reported and the
// outcome; a poll the provider does not answer has an error status and no
// error text.
func TestPollSpans(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	p := &failingPoll{polled: &polled{polls: map[string]int{}, statuses: []string{"delivered"}}}
	pol := fastPolicy("twilio")
	pol.DeliveryPoll = policy.PollDelays{policy.Duration(time.Millisecond), policy.Duration(2 * time.Millisecond)}
	d := run(t, pool, dispatcher.Config{Channels: []dispatcher.Channel{{Name: "c", Kind: "twilio", Provider: p, Policy: pol}},
		TracerProvider: tp, DeliveryPollInterval: time.Hour})
	r := rig{pool: pool, d: d}
	ctx, producer := producerCtx(t)
	tracedEnqueue(t, ctx, r, "e1")
	r.waitStatus(t, "e1", "SENT")

	pollOnce := func(what string) sdktrace.ReadOnlySpan {
		t.Helper()
		eventually(t, 10*time.Second, what, func() bool {
			n, err := dispatcher.PollDeliveries(context.Background(), d)
			if err != nil {
				t.Fatal(err)
			}
			return n == 1
		})
		var last sdktrace.ReadOnlySpan
		for _, s := range rec.Ended() {
			if s.Name() == dispatcher.SpanPoll {
				last = s
			}
		}
		if last == nil {
			t.Fatalf("%s: no %s span", what, dispatcher.SpanPoll)
		}
		return last
	}
	p.fail.Store(true)
	span := pollOnce("the failed poll")
	attrs := attrMap(span.Attributes())
	if span.Status().Code != codes.Error || attrs[dispatcher.AttrOutcome] != dispatcher.PollFailed || span.SpanContext().TraceID() != producer.TraceID() {
		t.Errorf("failed poll span: status %v, outcome %q, trace %s", span.Status(), attrs[dispatcher.AttrOutcome], span.SpanContext().TraceID())
	}
	for _, a := range span.Attributes() {
		if strings.Contains(a.Value.String(), "+15005550006") {
			t.Errorf("failed poll span attribute %s carries the error's text", a.Key)
		}
	}
	for _, ev := range span.Events() {
		t.Errorf("failed poll span has event %q: no error text is recorded", ev.Name)
	}

	p.fail.Store(false)
	span = pollOnce("the poll that finds it delivered")
	if span.SpanContext().TraceID() != producer.TraceID() || span.Parent().SpanID() != producer.SpanID() || span.SpanKind() != trace.SpanKindClient {
		t.Errorf("poll span in trace %s under %s (%s), want a client span under the producer's %s in %s",
			span.SpanContext().TraceID(), span.Parent().SpanID(), span.SpanKind(), producer.SpanID(), producer.TraceID())
	}
	attrs = attrMap(span.Attributes())
	for k, want := range map[string]string{"effectd.channel": "c", "effectd.event_id": "e1", "effectd.provider": "twilio",
		"effectd.delivery": "delivered", "effectd.outcome": dispatcher.PollApplied} {
		if attrs[attribute.Key(k)] != want {
			t.Errorf("poll span %s = %q, want %q (all: %v)", k, attrs[attribute.Key(k)], want, attrs)
		}
	}
	if attrs[dispatcher.AttrIntentID] == "" || span.Status().Code == codes.Error {
		t.Errorf("poll span: intent id %q, status %v", attrs[dispatcher.AttrIntentID], span.Status())
	}
}

// tracedEnqueue enqueues event on channel c in ctx's trace, through the Go client.
func tracedEnqueue(t *testing.T, ctx context.Context, r rig, event string) {
	t.Helper()
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if ok, err := dispatcher.Enqueue(ctx, tx, dispatcher.Intent{EventID: event, Channel: "c", Payload: json.RawMessage(`{"to":"+15005550006","body":"hi"}`)}); err != nil || !ok {
		t.Fatalf("enqueue %s: %v %v", event, ok, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestEventLogTraceID: the line a provider event's settlement of an in-doubt
// intent logs names the intent's trace id, as every line about one intent does.
func TestEventLogTraceID(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var logs bytes.Buffer
	r := newEventRig(t, nil)
	p := &scripted{calls: map[string]int{}, answer: func(string, int) (string, error) { return "x", nil }}
	d, err := dispatcher.New(r.pool, dispatcher.Config{Channels: []dispatcher.Channel{{Name: "sms", Kind: "twilio", Provider: p, Policy: policy.Default("twilio")}},
		Logger: slog.New(slog.NewJSONHandler(&lockedBuffer{mu: &mu, b: &logs}, nil))})
	if err != nil {
		t.Fatal(err)
	}
	id := r.insert(t, "e1", "IN_DOUBT", "", "")
	if _, err := r.pool.Exec(context.Background(), `UPDATE effectd.intents SET traceparent = $1 WHERE id = $2`, producerTraceparent, id); err != nil {
		t.Fatal(err)
	}
	if res, err := d.RecordEvent(context.Background(), twilioEvent(id, "e1", "SM1", "sent", statemachine.Accepted, "")); err != nil || res.Outcome != dispatcher.EventSettled {
		t.Fatalf("RecordEvent = %+v, %v; want settled", res, err)
	}
	mu.Lock()
	defer mu.Unlock()
	line := logLine(t, logs.String(), "in-doubt intent settled by a provider event")
	if line["trace_id"] != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("log line %v: want trace_id 4bf92f3577b34da6a3ce929d0e0e4736", line)
	}
}

// logLine is the JSON log line of logs whose message is msg.
func logLine(t *testing.T, logs, msg string) map[string]any {
	t.Helper()
	for l := range strings.Lines(logs) {
		var line map[string]any
		if err := json.Unmarshal([]byte(l), &line); err != nil {
			t.Fatalf("log line %q: %v", l, err)
		}
		if line["msg"] == msg {
			return line
		}
	}
	t.Fatalf("no log line %q in\n%s", msg, logs)
	return nil
}

// TestNotificationJoinsSourceTrace: a notification the notify trigger writes
// keeps its source intent's traceparent, so that its attempt lands in the
// source's trace: when a provider event settles the source, and when a
// producer cancels it in a transaction of its own trace (the source's trace
// wins; the transaction's setting is left as it was for what the producer
// enqueues next). A source with no trace gives its notification the
// transaction's.
func TestNotificationJoinsSourceTrace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	r := newEventRig(t, &dispatcher.Notify{Channel: "hook", On: []string{"sent", "cancelled"}})
	const other = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	traced := func(event, status, traceparent string) int64 {
		id := r.insert(t, event, status, "", "")
		if _, err := r.pool.Exec(ctx, `UPDATE effectd.intents SET traceparent = nullif($1, '') WHERE id = $2`, traceparent, id); err != nil {
			t.Fatal(err)
		}
		return id
	}
	id := traced("e1", "SENDING", producerTraceparent)
	r.record(t, twilioEvent(id, "e1", "SM1", "sent", statemachine.Accepted, ""))
	traced("e2", "PENDING", producerTraceparent)
	traced("e3", "PENDING", "")
	tx, err := r.pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `SELECT set_config('effectd.traceparent', $1, true)`, other); err != nil {
		t.Fatal(err)
	}
	// e2 last: the setting it leaves must be the transaction's own again
	for _, event := range []string{"e3", "e2"} {
		if _, err := tx.Exec(ctx, `SELECT effectd.cancel($1, 'sms', 'test')`, event); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := tx.Exec(ctx, `SELECT effectd.enqueue('after', 'hook', '{}')`); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for event, want := range map[string]string{"sms:e1:sent": producerTraceparent, "sms:e2:cancelled": producerTraceparent,
		"sms:e3:cancelled": other, "after": other} {
		if got := storedTraceparent(t, r.pool, event); got == nil || *got != want {
			t.Errorf("%s: traceparent %s, want %s", event, *cmp.Or(got, new("none")), want)
		}
	}
}
