// Package tracing turns OpenTelemetry tracing on from the standard OTEL_*
// variables (docs/tracing.md): off unless OTEL_EXPORTER_OTLP_ENDPOINT,
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT or OTEL_TRACES_EXPORTER says otherwise,
// and then spans go by OTLP over HTTP.
package tracing
