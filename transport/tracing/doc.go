// Package tracing turns the gateway's requests into OpenTelemetry spans and
// carries W3C trace context (traceparent, tracestate) from the client to the
// engine.
//
// A request is a server span named after its method and path ("POST
// /v1/chat/completions"); each of its attempts adds a "route" span (the
// routing decision) and an "upstream" client span (the request to the
// engine, with a "first_byte" event when the response head arrives). The
// engine receives the upstream span as its parent, as vLLM's own OTLP
// tracing expects (--otlp-traces-endpoint).
//
// Provider owns the SDK's tracer provider: a batch span processor whose
// one goroutine exports over OTLP/HTTP, stopped and joined by Shutdown.
// Spans are queued without blocking: when the queue is full, or the
// collector is slow or gone, spans are dropped, never requests delayed.
//
// Tracer and Span are transport-agnostic: headers reach them through
// propagation.TextMapCarrier. A nil *Tracer and the zero Span do nothing
// and allocate nothing, so the request path pays for tracing only when it
// is configured, and little more for a request the sampler drops.
package tracing
