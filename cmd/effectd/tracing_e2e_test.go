package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
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

// jaegerBinary is the Jaeger all-in-one the tracing test exports to:
// $EFFECTD_JAEGER, or jaeger on PATH (.ci/run builds it from deploy/jaeger).
// Without one the test skips, and fails in CI.
func jaegerBinary(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("EFFECTD_JAEGER"); p != "" {
		return p
	}
	if p, err := exec.LookPath("jaeger"); err == nil {
		return p
	}
	msg := "no Jaeger to export traces to: set EFFECTD_JAEGER or put jaeger on PATH; build it with " +
		"go -C deploy/jaeger build -o \"$(go env GOPATH)/bin/jaeger\" github.com/jaegertracing/jaeger/cmd/jaeger"
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
	return ""
}

// jaeger is a Jaeger all-in-one with in-memory storage on loopback ports.
type jaeger struct {
	otlp  string // OTLP over HTTP: http://host:port
	query string // the query API and UI: http://host:port
}

func startJaeger(t *testing.T) jaeger {
	t.Helper()
	bin := jaegerBinary(t)
	j := jaeger{otlp: "http://" + freeAddr(t), query: "http://" + freeAddr(t)}
	cfg := fmt.Sprintf(`service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      processors: [batch]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics: { level: none }
    logs: { level: warn }
extensions:
  jaeger_query:
    storage: { traces: memstore }
    http: { endpoint: %q }
    grpc: { endpoint: %q }
  jaeger_storage:
    backends:
      memstore: { memory: { max_traces: 10000 } }
receivers:
  otlp:
    protocols:
      http: { endpoint: %q }
processors:
  batch: { timeout: 100ms }
exporters:
  jaeger_storage_exporter: { trace_storage: memstore }
`, strings.TrimPrefix(j.query, "http://"), freeAddr(t), strings.TrimPrefix(j.otlp, "http://"))
	path := filepath.Join(t.TempDir(), "jaeger.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs strings.Builder
	cmd := exec.Command(bin, "--config", path)
	cmd.Stdout, cmd.Stderr = &logs, &logs
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			t.Logf("jaeger's log:\n%s", logs.String())
		}
	})
	poll(t, 60*time.Second, "jaeger's query API answers", func() bool {
		res, err := http.Get(j.query + "/api/services")
		if err != nil {
			return false
		}
		res.Body.Close()
		return res.StatusCode == http.StatusOK
	})
	return j
}

// jaegerSpan is a span as Jaeger's query API returns it.
type jaegerSpan struct {
	SpanID        string `json:"spanID"`
	OperationName string `json:"operationName"`
	References    []struct {
		RefType string `json:"refType"`
		SpanID  string `json:"spanID"`
	} `json:"references"`
	Tags []struct {
		Key   string `json:"key"`
		Value any    `json:"value"`
	} `json:"tags"`
	ProcessID string `json:"processID"`
}

func (s jaegerSpan) parent() string {
	for _, r := range s.References {
		if r.RefType == "CHILD_OF" {
			return r.SpanID
		}
	}
	return ""
}

func (s jaegerSpan) tag(key string) string {
	for _, kv := range s.Tags {
		if kv.Key == key {
			return fmt.Sprint(kv.Value)
		}
	}
	return ""
}

// trace reads trace id from Jaeger; raw is the answer as sent.
func (j jaeger) trace(id string) (spans []jaegerSpan, raw []byte, err error) {
	res, err := http.Get(j.query + "/api/traces/" + id)
	if err != nil {
		return nil, nil, err
	}
	defer res.Body.Close()
	var body struct {
		Data []struct {
			Spans []jaegerSpan `json:"spans"`
		} `json:"data"`
	}
	var sb strings.Builder
	if err := json.NewDecoder(teeReader{res.Body, &sb}).Decode(&body); err != nil {
		return nil, nil, err
	}
	for _, d := range body.Data {
		spans = append(spans, d.Spans...)
	}
	return spans, []byte(sb.String()), nil
}

type teeReader struct {
	r interface{ Read([]byte) (int, error) }
	w *strings.Builder
}

func (t teeReader) Read(p []byte) (int, error) {
	n, err := t.r.Read(p)
	t.w.Write(p[:n])
	return n, err
}

// TestTraceToJaeger: a producer's span, its enqueue through the Go client,
// effectd serve's attempt, its provider call to the sandbox's Twilio (with
// the HTTP request) and the status callbacks Twilio sends back all land in
// one trace that Jaeger's query API returns with the expected parents and
// attributes. EFFECTD_TRACE_JSON names a file to keep the trace in
// (docs/tracing.md draws it).
func TestTraceToJaeger(t *testing.T) {
	t.Parallel()
	j := startJaeger(t)
	ctx := context.Background()

	sb := sandbox.New(sandbox.Options{WebhookSecret: testSecret})
	sb.SetTwilioQueueDelay(50 * time.Millisecond)
	sb.SetTwilioDeliveryDelay(50 * time.Millisecond)
	srv := httptest.NewServer(sb.Handler())
	t.Cleanup(srv.Close)
	addr := freeAddr(t)
	dsn := pgtest.URL(t)
	cfg := filepath.Join(t.TempDir(), "effectd.yaml")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`channels:
  sms:
    provider: twilio
    twilio: { from: "+15005550006", base_url: %q, status_callback: %q }
    policy: { lease: 5s }
tracing:
  ui_url: "%s/trace/{trace_id}"
`, srv.URL, "http://"+addr+"/ingress/twilio/sms", j.query)), 0o600); err != nil {
		t.Fatal(err)
	}
	env := []string{"DATABASE_URL=" + dsn, "EFFECTD_CONFIG=" + cfg, "TWILIO_ACCOUNT_SID=" + e2eTwilioSID,
		"TWILIO_AUTH_TOKEN=" + e2eTwilioToken, "EFFECTD_INGRESS_ADDR=" + addr,
		"OTEL_EXPORTER_OTLP_ENDPOINT=" + j.otlp, "OTEL_BSP_SCHEDULE_DELAY=100", "OTEL_SERVICE_NAME=effectd"}
	runBinary(t, env, "migrate")
	p := startProc(t, env, "serve", "--addr", "127.0.0.1:0", "--insecure-no-auth")
	admin := p.waitAdmin(t)
	pool, err := pgxpool.New(ctx, dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(pool.Close)

	// The producer: a service of its own with a span around its transaction.
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
	if ok, err := dispatcher.Enqueue(pctx, tx, dispatcher.Intent{EventID: "order-1", Channel: "sms",
		Payload: `{"to":"+15551230001","body":"your order is placed"}`}); err != nil || !ok {
		t.Fatalf("enqueue: %v %v", ok, err)
	}
	if err := tx.Commit(pctx); err != nil {
		t.Fatal(err)
	}
	producer.End()
	traceID, producerID := producer.SpanContext().TraceID().String(), producer.SpanContext().SpanID().String()

	var id int64
	poll(t, 30*time.Second, "the SMS delivered, as its status callback says", func() bool {
		var delivery *string
		pool.QueryRow(ctx, `SELECT id, delivery FROM effectd.intents WHERE event_id = 'order-1'`).Scan(&id, &delivery)
		return delivery != nil && *delivery == "delivered"
	})

	// What each span must be: its parent's name and its attributes.
	type want struct {
		parent string
		attrs  map[string]string
	}
	intent := fmt.Sprint(id)
	wants := map[string]want{
		"checkout.place_order": {},
		dispatcher.SpanAttempt: {"checkout.place_order", map[string]string{"effectd.channel": "sms",
			"effectd.event_id": "order-1", "effectd.intent_id": intent, "effectd.attempt": "1", "effectd.outcome": "sent"}},
		dispatcher.SpanProviderCall: {dispatcher.SpanAttempt, map[string]string{"effectd.channel": "sms",
			"effectd.provider": "twilio", "effectd.idempotency_key": "sms:order-1"}},
		"HTTP POST": {dispatcher.SpanProviderCall, map[string]string{"http.response.status_code": "201"}},
		dispatcher.SpanEvent: {"checkout.place_order", map[string]string{"effectd.channel": "sms",
			"effectd.provider": "twilio", "effectd.intent_id": intent}},
	}
	var spans []jaegerSpan
	var raw []byte
	var missing []string
	deadline := time.Now().Add(30 * time.Second)
	for {
		spans, raw, err = j.trace(traceID)
		missing = missing[:0]
		names := map[string]bool{}
		for _, s := range spans {
			names[s.OperationName] = true
		}
		for name := range wants {
			if !names[name] {
				missing = append(missing, name)
			}
		}
		delivered := false
		for _, s := range spans {
			delivered = delivered || (s.OperationName == dispatcher.SpanEvent && s.tag("effectd.delivery") == "delivered")
		}
		if len(missing) == 0 && delivered {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("trace %s in Jaeger lacks %v (or the delivered callback; error %v):\n%s", traceID, missing, err, raw)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if path := os.Getenv("EFFECTD_TRACE_JSON"); path != "" {
		os.WriteFile(path, raw, 0o644)
	}

	byID := map[string]jaegerSpan{}
	for _, s := range spans {
		byID[s.SpanID] = s
	}
	for _, s := range spans {
		w, ok := wants[s.OperationName]
		if !ok {
			continue
		}
		if s.OperationName == "checkout.place_order" {
			if s.SpanID != producerID {
				t.Errorf("the producer's span is %s, want %s", s.SpanID, producerID)
			}
			continue
		}
		if got := byID[s.parent()].OperationName; got != w.parent {
			t.Errorf("%s (%s): parent %q, want %q", s.OperationName, s.SpanID, got, w.parent)
		}
		for k, v := range w.attrs {
			if got := s.tag(k); got != v {
				t.Errorf("%s: attribute %s = %q, want %q", s.OperationName, k, got, v)
			}
		}
		for _, kv := range s.Tags {
			if v := fmt.Sprint(kv.Value); strings.Contains(v, "your order is placed") || strings.Contains(v, "+15551230001") {
				t.Errorf("%s: attribute %s carries the payload: %q", s.OperationName, kv.Key, v)
			}
		}
	}

	// The intent's detail (and so its console page) names the trace.
	res, err := http.Get(admin + "/v1/intents/" + intent)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	var detail struct {
		TraceID string `json:"trace_id"`
	}
	json.NewDecoder(res.Body).Decode(&detail)
	if detail.TraceID != traceID {
		t.Errorf("the intent's detail names trace %q, want %s", detail.TraceID, traceID)
	}
}
