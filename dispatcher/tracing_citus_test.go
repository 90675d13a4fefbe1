//go:build citus

package dispatcher_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/effectd/effectd/dispatcher"
)

// TestCitusTraceparent is TestEnqueueKeepsTraceparent and TestAttemptSpans in
// the distributed mode: the transaction's effectd.traceparent is kept with an
// intent enqueued on its bucket (the column's default is evaluated on the
// coordinator, where the setting is), a batch's intents keep it too, and the
// attempt claimed on the bucket's shard is a child of the producer's span.
func TestCitusTraceparent(t *testing.T) {
	const buckets = 4
	pool := citusPool(t, buckets)
	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	p := &scripted{calls: map[string]int{}, answer: func(key string, n int) (string, error) { return "ref-" + key, nil }}
	chans := []dispatcher.Channel{{Name: "c", Kind: "webhook", Provider: p, Policy: fastPolicy("webhook")}}
	run(t, pool, dispatcher.Config{Channels: chans, Buckets: buckets, BucketLease: 2 * time.Second, TracerProvider: tp})

	ctx, producer := producerCtx(t)
	tx, err := pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SET LOCAL effectd.traceparent = '`+producerTraceparent+`'`); err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(ctx, `SELECT effectd.enqueue(event_id => 'e1', channel => 'c', payload => '{}', bucket => 3)`); err != nil {
		t.Fatal(err)
	}
	if _, err := dispatcher.EnqueueMany(context.Background(), tx, []dispatcher.Intent{{EventID: "m1", Channel: "c", Payload: json.RawMessage(`{}`)}},
		dispatcher.BatchOptions{Bucket: ptr(int64(2))}); err != nil {
		t.Fatal(err)
	}
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	for _, event := range []string{"e1", "m1"} {
		if got := storedTraceparent(t, pool, event); got == nil || *got != producerTraceparent {
			t.Errorf("%s: traceparent %v, want %s", event, got, producerTraceparent)
		}
	}
	eventually(t, 10*time.Second, "the attempt spans of e1 and m1", func() bool {
		n := 0
		for _, s := range rec.Ended() {
			if s.Name() == dispatcher.SpanAttempt && s.Parent().SpanID() == producer.SpanID() && s.SpanContext().TraceID() == producer.TraceID() {
				n++
			}
		}
		return n == 2
	})
}

func ptr[T any](v T) *T { return &v }
