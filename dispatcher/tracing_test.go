package dispatcher_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/pgtest"
)

// producerCtx is a context holding a sampled producer span with fixed ids.
func producerCtx(t *testing.T) (context.Context, trace.SpanContext) {
	t.Helper()
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	return trace.ContextWithSpanContext(context.Background(), sc), sc
}

const producerTraceparent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"

func storedTraceparent(t *testing.T, pool *pgxpool.Pool, event string) *string {
	t.Helper()
	var tp *string
	if err := pool.QueryRow(context.Background(), `SELECT traceparent FROM effectd.intents WHERE event_id = $1`, event).Scan(&tp); err != nil {
		t.Fatal(err)
	}
	return tp
}

// TestEnqueueKeepsTraceparent: the producer's trace context is kept with the
// intent from the Go client's context (Enqueue and EnqueueMany) and from the transaction's
// effectd.traceparent setting (a Python or Java producer's way); a value
// that is not a traceparent, or none, keeps nothing.
func TestEnqueueKeepsTraceparent(t *testing.T) {
	t.Parallel()
	pool := registered(t)
	ctx, _ := producerCtx(t)
	payload := `{"url_path":"/x"}`

	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := dispatcher.Enqueue(ctx, tx, dispatcher.Intent{EventID: "go-traced", Channel: "hook", Payload: payload}); err != nil || !ok {
		t.Fatalf("enqueue: %v %v", ok, err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	tx, err = pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dispatcher.EnqueueMany(ctx, tx, []dispatcher.Intent{{EventID: "go-batch", Channel: "hook", Payload: payload}}, dispatcher.BatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	if ok, err := enqueue(t, pool, dispatcher.Intent{EventID: "go-untraced", Channel: "hook", Payload: payload}); err != nil || !ok {
		t.Fatalf("enqueue: %v %v", ok, err)
	}
	for event, setting := range map[string]string{"sql-traced": producerTraceparent, "sql-garbage": "00-not-a-trace-01", "sql-upper": "00-4BF92F3577B34DA6A3CE929D0E0E4736-00F067AA0BA902B7-01"} {
		tx, err := pool.Begin(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SELECT set_config('effectd.traceparent', $1, true)`, setting); err != nil {
			t.Fatal(err)
		}
		if _, err := tx.Exec(ctx, `SELECT effectd.enqueue($1, 'hook', $2::jsonb)`, event, payload); err != nil {
			t.Fatal(err)
		}
		if err := tx.Commit(ctx); err != nil {
			t.Fatal(err)
		}
	}
	// SET LOCAL ends with its transaction: the next one keeps nothing.
	if _, err := pool.Exec(ctx, `SELECT effectd.enqueue('sql-after', 'hook', $1::jsonb)`, payload); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"go-traced": producerTraceparent, "go-batch": producerTraceparent, "sql-traced": producerTraceparent}
	for _, event := range []string{"go-traced", "go-batch", "go-untraced", "sql-traced", "sql-garbage", "sql-upper", "sql-after"} {
		got := storedTraceparent(t, pool, event)
		switch w, traced := want[event]; {
		case traced && (got == nil || *got != w):
			t.Errorf("%s: traceparent %v, want %s", event, got, w)
		case !traced && got != nil:
			t.Errorf("%s: traceparent %q, want none", event, *got)
		}
	}
}

// TestAttemptSpans: with a tracer provider, each attempt is a span in the
// producer's trace, a child of the producer's span, with the provider call a
// child of it carrying the idempotency key; the call's latency histogram
// carries the trace id as its exemplar. Without one, nothing is traced.
func TestAttemptSpans(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	p := &scripted{calls: map[string]int{}, answer: func(key string, n int) (string, error) {
		if n == 1 {
			return "", providerErr{retryable: true}
		}
		return "ref-" + key, nil
	}}
	chans := []dispatcher.Channel{{Name: "c", Kind: "webhook", Provider: p, Policy: fastPolicy("webhook")}}
	reg := prometheus.NewRegistry()
	d := run(t, pool, dispatcher.Config{Channels: chans, TracerProvider: tp, Registerer: reg})
	r := rig{pool: pool, d: d}

	ctx, producer := producerCtx(t)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := dispatcher.Enqueue(ctx, tx, dispatcher.Intent{EventID: "e1", Channel: "c", Payload: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	r.waitStatus(t, "e1", "SENT")

	var attempts []sdktrace.ReadOnlySpan
	eventually(t, 5*time.Second, "two attempt spans and their provider calls", func() bool {
		attempts = attempts[:0]
		calls := 0
		for _, s := range rec.Ended() {
			switch s.Name() {
			case dispatcher.SpanAttempt:
				attempts = append(attempts, s)
			case dispatcher.SpanProviderCall:
				calls++
			}
		}
		return len(attempts) == 2 && calls == 2
	})
	outcomes := map[string]bool{}
	for _, a := range attempts {
		if a.SpanContext().TraceID() != producer.TraceID() || a.Parent().SpanID() != producer.SpanID() {
			t.Errorf("attempt span in trace %s under %s, want the producer's %s under %s", a.SpanContext().TraceID(), a.Parent().SpanID(), producer.TraceID(), producer.SpanID())
		}
		attrs := attrMap(a.Attributes())
		if attrs[dispatcher.AttrChannel] != "c" || attrs[dispatcher.AttrEventID] != "e1" || attrs[dispatcher.AttrIntentID] == "" {
			t.Errorf("attempt attributes %v", attrs)
		}
		outcomes[attrs[dispatcher.AttrOutcome]+"/"+attrs[dispatcher.AttrAttempt]] = true
	}
	if !outcomes["retry/1"] || !outcomes["sent/2"] {
		t.Errorf("attempt outcomes %v, want retry/1 and sent/2", outcomes)
	}
	if got := exemplarTraces(t, reg, "effectd_provider_call_seconds"); !got[producer.TraceID().String()] {
		t.Errorf("call latency exemplars name traces %v, want %s", got, producer.TraceID())
	}
	for _, s := range rec.Ended() {
		if s.Name() != dispatcher.SpanProviderCall {
			continue
		}
		if s.SpanContext().TraceID() != producer.TraceID() || !isOneOf(s.Parent().SpanID(), attempts) {
			t.Errorf("provider call span is not a child of an attempt")
		}
		if k := attrMap(s.Attributes())[dispatcher.AttrIdempotencyKey]; k != "c:e1" {
			t.Errorf("provider call idempotency key %q, want c:e1", k)
		}
	}
}

func attrMap(kvs []attribute.KeyValue) map[attribute.Key]string {
	m := map[attribute.Key]string{}
	for _, kv := range kvs {
		m[kv.Key] = kv.Value.String()
	}
	return m
}

func isOneOf(id trace.SpanID, spans []sdktrace.ReadOnlySpan) bool {
	for _, s := range spans {
		if s.SpanContext().SpanID() == id {
			return true
		}
	}
	return false
}

// exemplarTraces are the trace ids the exemplars of histogram name carry.
func exemplarTraces(t *testing.T, reg *prometheus.Registry, name string) map[string]bool {
	t.Helper()
	families, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	ids := map[string]bool{}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, b := range m.GetHistogram().GetBucket() {
				for _, l := range b.GetExemplar().GetLabel() {
					if l.GetName() == "trace_id" {
						ids[l.GetValue()] = true
					}
				}
			}
		}
	}
	return ids
}
