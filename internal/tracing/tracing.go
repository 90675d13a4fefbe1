package tracing

import (
	"context"
	"errors"
	"fmt"
	"net/http"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	semconv "go.opentelemetry.io/otel/semconv/v1.43.0"
)

// Enabled reports whether getenv's OTEL_* variables ask for traces: an OTLP
// endpoint, or OTEL_TRACES_EXPORTER other than none; OTEL_SDK_DISABLED=true
// turns everything off.
func Enabled(getenv func(string) string) bool {
	if getenv("OTEL_SDK_DISABLED") == "true" {
		return false
	}
	switch getenv("OTEL_TRACES_EXPORTER") {
	case "none":
		return false
	case "":
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	}
	return true
}

// Setup starts exporting spans when Enabled: it installs the tracer provider
// and the W3C trace-context propagator globally and returns the provider,
// whose Shutdown flushes the spans not yet sent. Off, it returns nil and
// installs nothing. The exporter, its endpoint, headers and timeouts, the
// sampler (OTEL_TRACES_SAMPLER) and the resource (OTEL_SERVICE_NAME,
// OTEL_RESOURCE_ATTRIBUTES; service.name defaults to effectd) come from the
// OTEL_* variables as the OpenTelemetry SDK reads them.
func Setup(ctx context.Context, getenv func(string) string) (*sdktrace.TracerProvider, error) {
	if !Enabled(getenv) {
		return nil, nil
	}
	if e := getenv("OTEL_TRACES_EXPORTER"); e != "" && e != "otlp" {
		return nil, fmt.Errorf("OTEL_TRACES_EXPORTER=%s: effectd exports traces by otlp only (or none)", e)
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if p := getenv(v); p != "" {
			if p != "http/protobuf" {
				return nil, fmt.Errorf("%s=%s: effectd sends OTLP over http/protobuf only", v, p)
			}
			break
		}
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, fmt.Errorf("tracing: OTLP exporter: %w", err)
	}
	res, err := resource.New(ctx, resource.WithAttributes(semconv.ServiceName("effectd")), resource.WithFromEnv(),
		resource.WithTelemetrySDK(), resource.WithHost())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, fmt.Errorf("tracing: resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	return tp, nil
}

// Transport traces each request rt carries as a client span, a child of the
// span in the request's context, and sends the trace context with it.
func Transport(rt http.RoundTripper) http.RoundTripper {
	return otelhttp.NewTransport(rt)
}
