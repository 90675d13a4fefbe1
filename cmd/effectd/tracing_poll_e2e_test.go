package main

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"

	"github.com/effectd/effectd/dispatcher"
	"github.com/effectd/effectd/internal/pgtest"
	"github.com/effectd/effectd/providers/sandbox"
)

// TestTracePollAndNotifyToJaeger: where no status callback comes, the
// delivery poll is in the producer's trace too, and so are the notifications
// the producer is told by: Jaeger's query API returns, in one trace, the
// producer's span, the SMS's attempt with its provider call, the delivery
// poll that found it delivered (with its HTTP request), and the attempt of
// each notification (sent, delivered) on the notify channel with its own
// provider call, each attempt and poll a child of the producer's span.
func TestTracePollAndNotifyToJaeger(t *testing.T) {
	t.Parallel()
	j := startJaeger(t)
	ctx := context.Background()

	sb := sandbox.New(sandbox.Options{WebhookSecret: testSecret})
	sb.SetTwilioQueueDelay(50 * time.Millisecond)
	sb.SetTwilioDeliveryDelay(50 * time.Millisecond)
	srv := httptest.NewServer(sb.Handler())
	t.Cleanup(srv.Close)
	dsn := pgtest.URL(t)
	cfg := filepath.Join(t.TempDir(), "effectd.yaml")
	// no status_callback: only the poll tells the delivery
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`channels:
  sms:
    provider: twilio
    twilio: { from: "+15005550006", base_url: %q }
    policy: { lease: 5s, delivery_poll: [200ms, 500ms, 1s, 2s, 5s] }
    notify: { channel: told, on: [sent, delivered] }
  told:
    provider: webhook
    webhook: { url: %q, secret_env: HOOK_SECRET }
`, srv.URL, srv.URL+"/hooks/told")), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"DATABASE_URL=" + dsn, "EFFECTD_CONFIG=" + cfg, "TWILIO_ACCOUNT_SID=" + e2eTwilioSID,
		"TWILIO_AUTH_TOKEN=" + e2eTwilioToken, "HOOK_SECRET=" + testSecret,
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + j.otlp, "OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_SERVICE_NAME=effectd"}
	runBinary(t, env, "migrate")
	p := startProc(t, env, "serve", "--addr", "127.0.0.1:0", "--insecure-no-auth")
	p.waitAdmin(t)
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	exp, err := otlptracehttp.New(ctx, otlptracehttp.WithEndpointURL(j.otlp+"/v1/traces"))
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp),
		sdktrace.WithResource(resource.NewSchemaless(semconv.ServiceName("checkout"))))
	t.Cleanup(func() { tp.Shutdown(context.Background()) })
	pctx, producer := tp.Tracer("checkout").Start(ctx, "checkout.place_order")
	tx, err := pool.Begin(pctx)
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := dispatcher.Enqueue(pctx, tx, dispatcher.Intent{EventID: "order-2", Channel: "sms",
		Payload: `{"to":"+15551230001","body":"your order is placed"}`}); err != nil || !ok {
		t.Fatalf("enqueue: %v %v", ok, err)
	}
	if err := tx.Commit(pctx); err != nil {
		t.Fatal(err)
	}
	producer.End()
	traceID, producerID := producer.SpanContext().TraceID().String(), producer.SpanContext().SpanID().String()

	var id int64
	poll(t, 30*time.Second, "the SMS delivered, as the poll found, and both notifications sent", func() bool {
		var delivery *string
		var told int
		pool.QueryRow(ctx, `SELECT id, delivery, (SELECT count(*) FROM effectd.intents WHERE channel = 'told' AND status = 'SENT')
			FROM effectd.intents WHERE event_id = 'order-2'`).Scan(&id, &delivery, &told)
		return delivery != nil && *delivery == "delivered" && told == 2
	})
	intent := fmt.Sprint(id)

	// found picks out the span of spans named name with tags, under a parent
	// named parent (the producer's span: "producer"); "" when there is none.
	var spans []jaegerSpan
	var raw []byte
	found := func(name, parent string, tags map[string]string) string {
		byID := map[string]jaegerSpan{}
		for _, s := range spans {
			byID[s.SpanID] = s
		}
	next:
		for _, s := range spans {
			if s.OperationName != name {
				continue
			}
			up := byID[s.parent()]
			if (parent == "producer" && s.parent() != producerID) || (parent != "producer" && up.SpanID != parent) {
				continue
			}
			for k, v := range tags {
				if s.tag(k) != v {
					continue next
				}
			}
			return s.SpanID
		}
		return ""
	}
	var missing []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		spans, raw, err = j.trace(traceID)
		missing = missing[:0]
		need := func(what, id string) string {
			if id == "" {
				missing = append(missing, what)
			}
			return id
		}
		need("the producer's span", found("checkout.place_order", "", nil))
		if attempt := need("the SMS's attempt", found(dispatcher.SpanAttempt, "producer", map[string]string{
			"effectd.channel": "sms", "effectd.event_id": "order-2", "effectd.intent_id": intent, "effectd.outcome": "sent"})); attempt != "" {
			need("its provider call", found(dispatcher.SpanProviderCall, attempt, map[string]string{
				"effectd.channel": "sms", "effectd.provider": "twilio", "effectd.idempotency_key": "sms:order-2"}))
		}
		if polled := need("the poll that found it delivered", found(dispatcher.SpanPoll, "producer", map[string]string{
			"effectd.channel": "sms", "effectd.event_id": "order-2", "effectd.intent_id": intent, "effectd.provider": "twilio",
			"effectd.delivery": "delivered", "effectd.outcome": dispatcher.PollApplied})); polled != "" {
			need("the poll's HTTP request", found("HTTP GET", polled, nil))
		}
		for _, outcome := range []string{"sent", "delivered"} {
			if attempt := need("the attempt of the "+outcome+" notification", found(dispatcher.SpanAttempt, "producer", map[string]string{
				"effectd.channel": "told", "effectd.event_id": "sms:order-2:" + outcome, "effectd.notification": "true",
				"effectd.outcome": "sent"})); attempt != "" {
				need("its provider call", found(dispatcher.SpanProviderCall, attempt, map[string]string{
					"effectd.channel": "told", "effectd.provider": "webhook"}))
			}
		}
		if len(missing) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("trace %s in Jaeger lacks %s (error %v):\n%s", traceID, strings.Join(missing, ", "), err, raw)
		}
		time.Sleep(200 * time.Millisecond)
	}
	for _, s := range spans {
		for _, kv := range s.Tags {
			if v := fmt.Sprint(kv.Value); strings.Contains(v, "your order is placed") || strings.Contains(v, "+15551230001") {
				t.Errorf("%s: attribute %s carries the payload: %q", s.OperationName, kv.Key, v)
			}
		}
	}
}
