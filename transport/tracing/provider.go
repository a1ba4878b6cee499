package tracing

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Export bounds. A batch that the collector does not take within
// exportTimeout is dropped, not retried: the next one tries again, and
// spans that arrive meanwhile wait in a queue of queueSize, beyond which
// they are dropped. Requests never wait on either.
const (
	queueSize     = 2048
	batchSize     = 512
	batchTimeout  = 2 * time.Second
	exportTimeout = 5 * time.Second
)

// Options configure a Provider.
type Options struct {
	// Endpoint is the OTLP/HTTP collector: a base URL such as
	// http://collector:4318, which gets /v1/traces, or the full URL.
	Endpoint string
	// SampleRatio is the share of traces started here that are sampled,
	// in [0, 1]. A client's traceparent decides for the traces it starts.
	SampleRatio float64
	// ServiceVersion is the resource's service.version.
	ServiceVersion string
	Logger         *slog.Logger // nil discards
}

// Provider exports the spans of its Tracer over OTLP/HTTP. It owns one
// goroutine, the batch span processor's, which Shutdown stops and joins.
// Its methods are safe for concurrent use.
type Provider struct {
	tp     *sdktrace.TracerProvider
	tracer *Tracer
	tr     *http.Transport
}

// Start builds a Provider for o. It does not contact the collector: an
// unreachable one costs dropped spans and a logged warning, later.
func Start(o Options) (*Provider, error) {
	endpoint, err := TracesURL(o.Endpoint)
	if err != nil {
		return nil, err
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	// The transport is the Provider's own, so that Shutdown can close its
	// idle connections; the exporter's default one is shared by every
	// exporter in the process.
	tr := http.DefaultTransport.(*http.Transport).Clone()
	exp, err := otlptracehttp.New(context.Background(),
		otlptracehttp.WithEndpointURL(endpoint),
		otlptracehttp.WithHTTPClient(&http.Client{Transport: tr, Timeout: exportTimeout}),
		otlptracehttp.WithTimeout(exportTimeout),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}),
	)
	if err != nil {
		tr.CloseIdleConnections()
		return nil, fmt.Errorf("observability.otlp_endpoint: %w", err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithBatcher(&watchedExporter{SpanExporter: exp, log: log, endpoint: endpoint},
			sdktrace.WithMaxQueueSize(queueSize),
			sdktrace.WithMaxExportBatchSize(batchSize),
			sdktrace.WithBatchTimeout(batchTimeout),
			sdktrace.WithExportTimeout(exportTimeout)),
		sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(o.SampleRatio))),
		sdktrace.WithResource(resource.NewSchemaless(
			attribute.String("service.name", "inferrail"),
			attribute.String("service.version", o.ServiceVersion))),
	)
	return &Provider{tp: tp, tracer: New(tp), tr: tr}, nil
}

// Tracer is the Tracer whose spans p exports.
func (p *Provider) Tracer() *Tracer { return p.tracer }

// Shutdown exports the spans still queued, within ctx, and stops p's
// goroutine. Spans ended afterwards are dropped.
func (p *Provider) Shutdown(ctx context.Context) error {
	err := p.tp.Shutdown(ctx)
	p.tr.CloseIdleConnections()
	return err
}

// TracesURL is the URL spans are posted to for endpoint: endpoint itself
// when it has a path, else endpoint with OTLP's standard /v1/traces.
func TracesURL(endpoint string) (string, error) {
	u, err := url.Parse(endpoint)
	if err != nil {
		return "", fmt.Errorf("observability.otlp_endpoint: %w", err)
	}
	if u.Scheme != "http" && u.Scheme != "https" || u.Host == "" {
		return "", fmt.Errorf("observability.otlp_endpoint: %q: want an http or https URL, such as http://localhost:4318", endpoint)
	}
	if u.Path == "" || u.Path == "/" {
		u.Path = "/v1/traces"
	}
	return u.String(), nil
}

// watchedExporter logs when export starts failing and when it recovers,
// rather than every failure. It reports success to the batch processor
// either way: the processor has nothing to do with an error but hand it to
// OpenTelemetry's process-wide error handler, which would log each one.
type watchedExporter struct {
	sdktrace.SpanExporter
	log      *slog.Logger
	endpoint string
	failing  atomic.Bool
}

func (e *watchedExporter) ExportSpans(ctx context.Context, spans []sdktrace.ReadOnlySpan) error {
	err := e.SpanExporter.ExportSpans(ctx, spans)
	switch {
	case err != nil && !e.failing.Swap(true):
		e.log.Warn("trace export failing; spans are dropped until it recovers",
			"otlp_endpoint", e.endpoint, "spans", len(spans), "err", err)
	case err == nil && e.failing.Swap(false):
		e.log.Info("trace export recovered", "otlp_endpoint", e.endpoint)
	}
	return nil
}
