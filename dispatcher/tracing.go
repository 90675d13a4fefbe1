package dispatcher

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"

	"github.com/effectd/effectd/internal/query"
	"github.com/effectd/effectd/internal/query/intentdb"
	"github.com/effectd/effectd/internal/query/readdb"
	"github.com/effectd/effectd/statemachine"
)

// TracerName is the instrumentation scope of the dispatcher's spans.
const TracerName = "github.com/effectd/effectd/dispatcher"

// Span and attribute names (docs/tracing.md). No attribute carries a payload
// or anything redaction hides: only identities, counts and outcomes.
const (
	SpanAttempt      = "effectd.attempt"
	SpanProviderCall = "effectd.provider.call"
	SpanLookup       = "effectd.lookup"
	SpanSettle       = "effectd.settle"
	SpanEvent        = "effectd.provider_event"
	SpanOperator     = "effectd.operator"
	SpanPoll         = "effectd.delivery_poll"

	AttrChannel        = attribute.Key("effectd.channel")
	AttrEventID        = attribute.Key("effectd.event_id")
	AttrIntentID       = attribute.Key("effectd.intent_id")
	AttrAttempt        = attribute.Key("effectd.attempt")
	AttrOutcome        = attribute.Key("effectd.outcome")
	AttrIdempotencyKey = attribute.Key("effectd.idempotency_key")
	AttrProvider       = attribute.Key("effectd.provider")
	AttrNotification   = attribute.Key("effectd.notification")
	AttrDelivery       = attribute.Key("effectd.delivery")
)

// linkAfter is how long after its enqueue an attempt stops being a child of
// the producer's span: the attempt starts a trace of its own, linked to the
// producer's, so that a trace backend does not hold one trace open for days
// of retries.
const linkAfter = time.Hour

// traceparentOf is the W3C traceparent of the span in ctx, "" without one.
func traceparentOf(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-" + sc.TraceFlags().String()
}

// producerSpan is the span context a stored traceparent names, invalid for ""
// or a value that is not one.
func producerSpan(traceparent string) trace.SpanContext {
	if traceparent == "" {
		return trace.SpanContext{}
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), propagation.MapCarrier{"traceparent": traceparent})
	return trace.SpanContextFromContext(ctx)
}

// TraceID is the trace id a stored traceparent names, "" without one: the id
// logs and the console show for an intent.
func TraceID(traceparent string) string {
	if sc := producerSpan(traceparent); sc.IsValid() {
		return sc.TraceID().String()
	}
	return ""
}

// startIntentSpan starts span name about an intent enqueued at created under
// traceparent, in the producer's trace (intentSpanStart). It returns ctx and
// nil when tracing is off.
func startIntentSpan(ctx context.Context, tracer trace.Tracer, name, traceparent string, created, now time.Time, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if tracer == nil {
		return ctx, nil
	}
	ctx, opts := intentSpanStart(ctx, traceparent, created, now)
	return tracer.Start(ctx, name, append(opts, trace.WithAttributes(attrs...))...)
}

// intentSpanStart is where a span about an intent enqueued at created under
// traceparent starts at now: a child of the producer's span, or a new root
// linked to it once linkAfter has passed. A span already in ctx (an
// operator's request) is linked. Without a producer span it is a child of
// ctx's span, or a root.
func intentSpanStart(ctx context.Context, traceparent string, created, now time.Time) (context.Context, []trace.SpanStartOption) {
	opts := []trace.SpanStartOption{trace.WithTimestamp(now)}
	if sc := producerSpan(traceparent); sc.IsValid() {
		if caller := trace.SpanContextFromContext(ctx); caller.IsValid() {
			opts = append(opts, trace.WithLinks(trace.Link{SpanContext: caller}))
		}
		if now.Sub(created) > linkAfter {
			opts = append(opts, trace.WithNewRoot(), trace.WithLinks(trace.Link{SpanContext: sc}))
		} else {
			ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
		}
	}
	return ctx, opts
}

// startChild starts span name under ctx's span; ctx and nil when tracing is off.
func (d *Dispatcher) startChild(ctx context.Context, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	if d.tracer == nil {
		return ctx, nil
	}
	return d.tracer.Start(ctx, name, trace.WithAttributes(attrs...))
}

// intentAttrs are the attributes naming an intent.
func intentAttrs(channel, eventID string, id int64, attempt int32) []attribute.KeyValue {
	return []attribute.KeyValue{AttrChannel.String(channel), AttrEventID.String(eventID), AttrIntentID.Int64(id), AttrAttempt.Int(int(attempt))}
}

// startAttempt starts the span of one attempt of c, or returns ctx and nil
// when tracing is off.
func (d *Dispatcher) startAttempt(ctx context.Context, ch *channel, c *claimed, now time.Time) (context.Context, trace.Span) {
	if d.tracer == nil {
		return ctx, nil
	}
	attrs := intentAttrs(ch.Name, c.EventID, c.ID, c.Attempts)
	if ch.notifies {
		attrs = append(attrs, AttrNotification.Bool(true))
	}
	return startIntentSpan(ctx, d.tracer, SpanAttempt, c.Traceparent, c.CreatedAt, now, attrs...)
}

// startSettle starts the span of the reconciler's settlement of r.
func (d *Dispatcher) startSettle(ctx context.Context, r intentdb.Unsettled) (context.Context, trace.Span) {
	if d.tracer == nil {
		return ctx, nil
	}
	return startIntentSpan(ctx, d.tracer, SpanSettle, r.Traceparent, r.CreatedAt, time.Now(),
		append(intentAttrs(r.Channel, r.EventID, r.ID, r.Attempts), attribute.String("effectd.from", string(r.Status)))...)
}

// startPoll starts the span of a delivery poll of x, a client span in the
// intent's trace as its attempts are, or returns ctx and nil when tracing is
// off. The provider's HTTP requests (instrumented by the wiring) are its
// children.
func (d *Dispatcher) startPoll(ctx context.Context, ch *channel, x intentdb.DuePoll) (context.Context, trace.Span) {
	if d.tracer == nil {
		return ctx, nil
	}
	ctx, opts := intentSpanStart(ctx, x.Traceparent, x.CreatedAt, time.Now())
	return d.tracer.Start(ctx, SpanPoll, append(opts, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(append(intentAttrs(ch.Name, x.EventID, x.ID, x.Attempts), AttrProvider.String(ch.Kind))...))...)
}

// Delivery poll outcomes, on the poll's span.
const (
	PollApplied   = "applied"   // the intent's delivery moved
	PollUnchanged = "unchanged" // the answer moves nothing, or the row had moved on (fenced)
	PollFailed    = "failed"    // the provider did not answer
	PollNotKept   = "not_kept"  // the answer could not be recorded
)

// endPollSpan records on a poll's span the delivery the provider's answer
// makes the intent's (to), the outcome, and an error status when the provider call (pollErr) or
// its record (recordErr) failed, and ends it. No error text is recorded.
func endPollSpan(span trace.Span, to statemachine.Delivery, pollErr, recordErr error, moved bool) {
	outcome := PollUnchanged
	switch {
	case pollErr != nil:
		outcome = PollFailed
	case recordErr != nil:
		outcome = PollNotKept
	case moved:
		outcome = PollApplied
	}
	if pollErr == nil {
		span.SetAttributes(AttrDelivery.String(string(to)))
	}
	endSpan(span, outcome, pollErr != nil || recordErr != nil)
}

// endSpan records outcome on span, an error status when failed, and ends
// it. No error text is recorded: a provider's may quote the payload.
func endSpan(span trace.Span, outcome string, failed bool) {
	span.SetAttributes(AttrOutcome.String(outcome))
	if failed {
		span.SetStatus(codes.Error, outcome)
	}
	span.End()
}

// send is the provider call of an attempt, in a span of its own when tracing
// is on: the provider's HTTP requests (instrumented by the wiring) are its
// children.
func (d *Dispatcher) send(ctx context.Context, ch *channel, c *claimed, meta map[string]string) (string, error) {
	if d.tracer == nil {
		return ch.Provider.Send(ctx, c.Key, c.Payload, meta)
	}
	ctx, span := d.tracer.Start(ctx, SpanProviderCall, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(AttrChannel.String(ch.Name), AttrProvider.String(ch.Kind), AttrIdempotencyKey.String(c.Key)))
	ref, err := ch.Provider.Send(ctx, c.Key, c.Payload, meta)
	if err != nil {
		span.SetStatus(codes.Error, "the provider call failed")
	}
	span.End()
	return ref, err
}

// observe records v in h with the trace id of ctx's span as its exemplar
// when that span is sampled.
func observe(ctx context.Context, h prometheus.Observer, v float64) {
	sc := trace.SpanContextFromContext(ctx)
	if eo, ok := h.(prometheus.ExemplarObserver); ok && sc.IsSampled() {
		eo.ObserveWithExemplar(v, prometheus.Labels{"trace_id": sc.TraceID().String()})
		return
	}
	h.Observe(v)
}

// traceAttrs are the slog attributes naming an intent's trace: none without one.
func traceAttrs(traceparent string) []any {
	if id := TraceID(traceparent); id != "" {
		return []any{"trace_id", id}
	}
	return nil
}

// intentLog is the logger for lines about an intent kept under traceparent:
// they name its trace id.
func (d *Dispatcher) intentLog(traceparent string) *slog.Logger {
	if id := TraceID(traceparent); id != "" {
		return d.log.With("trace_id", id)
	}
	return d.log
}

// lookupOutcome names a lookup's answer on its span.
func lookupOutcome(found bool, err error) string {
	switch {
	case err != nil:
		return LookupAmbiguous
	case found:
		return LookupFound
	}
	return LookupAbsent
}

// OperatorSpan starts the span of an operator's action on intent id, a
// child of ctx's span (the operator's request, when traced) linked to the
// intent's producer span, and returns the function that ends it with the
// action's error (nil: applied, otherwise refused). Operator actions are
// traced by the global tracer provider, which the wiring sets when tracing
// is on; the intent's trace context is read from db only then.
func OperatorSpan(ctx context.Context, db query.DB, action string, id int64) (context.Context, func(err error)) {
	ctx, span := otel.Tracer(TracerName).Start(ctx, SpanOperator,
		trace.WithAttributes(attribute.String("effectd.action", action), AttrIntentID.Int64(id)))
	if span.IsRecording() {
		if tp, _, err := readdb.IntentTraceparent(ctx, db, id); err == nil {
			if sc := producerSpan(tp); sc.IsValid() {
				span.AddLink(trace.Link{SpanContext: sc})
			}
		}
	}
	return ctx, func(err error) { endSpan(span, operatorOutcome(err), err != nil) }
}

// operatorOutcome names an operator action's result on its span.
func operatorOutcome(err error) string {
	if err != nil {
		return "refused"
	}
	return "applied"
}

// EventRecorder stores provider events and applies them to their intents.
type EventRecorder interface {
	RecordEvent(ctx context.Context, ev ProviderEvent) (EventResult, error)
}

// Events is what the ingress records provider events with: d itself, or with
// tracing on a recorder that adds a span for each event applied to an intent,
// in the intent's trace.
func (d *Dispatcher) Events() EventRecorder {
	if d.tracer == nil {
		return d
	}
	return tracedEvents{d}
}

type tracedEvents struct{ d *Dispatcher }

// RecordEvent is Dispatcher.RecordEvent, then the span of what it did: the
// intent is known only once the event is matched, so the span is started
// afterwards with the time the event arrived.
func (t tracedEvents) RecordEvent(ctx context.Context, ev ProviderEvent) (EventResult, error) {
	start := time.Now()
	res, err := t.d.RecordEvent(ctx, ev)
	var traceparent string
	created := start
	if res.IntentID != 0 {
		traceparent, created, _ = readdb.IntentTraceparent(ctx, t.d.pool, res.IntentID)
	}
	outcome := res.Outcome
	if res.Duplicate {
		outcome = "duplicate"
	}
	_, span := startIntentSpan(ctx, t.d.tracer, SpanEvent, traceparent, created, start,
		AttrChannel.String(ev.Channel), AttrProvider.String(ev.Provider), AttrIntentID.Int64(res.IntentID),
		attribute.String("effectd.provider_event.id", ev.EventID), attribute.String("effectd.provider_event.type", ev.Type),
		AttrDelivery.String(string(res.To)))
	endSpan(span, outcome, err != nil)
	return res, err
}
