// Package discovery is what the gateway's discovery sources share, and the
// endpoint-file source: llm-d's file-discovery format, read and watched
// without Kubernetes (file.go). transport/kubernetes is the other source.
//
// A source hands what it finds to a Sink (the fleet: Fleet.SetEndpoints)
// through a Reporter, which also tells the operator, once, when the source
// cannot refresh: a log line naming the likely cause, the metrics
// inferrail_discovery_failing{source} and
// inferrail_discovery_failures_total{source}, and the source's failing
// field on /admin/replicas (Fleet.SourceFailing). The source's last good
// endpoints stay meanwhile.
//
// discovery makes no routing decision and keeps no membership: the fleet
// actor owns that. A Watcher's goroutine is its caller's: Run returns when
// its context ends.
package discovery

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"reflect"
	"strconv"
	"sync"

	"github.com/VictoriaMetrics/metrics"

	"github.com/inferrail/inferrail/actors/fleet"
	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/model/kvevent"
)

// Template is what every endpoint of one source shares: how its engine is
// reached, what it serves, its caps and its KV event ports. Immutable.
type Template struct {
	Scheme           string   // http or https
	Models           []string // configured model names
	MaxConcurrency   int
	MaxPending       int
	KVCapacityBlocks int
	// KVEventsPort, when not 0, is the port every endpoint's engine
	// publishes KV events on, at its address; KVEventsReplayPort its
	// replay socket's.
	KVEventsPort       int
	KVEventsReplayPort int
	Engine             kvevent.Engine
}

// Endpoint returns the endpoint id of the engine at addr:port, with
// labels (the caller's; kept). rank is its data-parallel rank within its
// pod (its index in the pool's target ports; 0 for an engine alone):
// vLLM offsets each DP rank's KV event ports by the rank (base port +
// dp_rank, for the endpoint and the replay endpoint), so rank r's streams
// are on KVEventsPort+r and KVEventsReplayPort+r.
func (t *Template) Endpoint(id string, addr netip.Addr, port, rank int, labels map[string]string) fleet.Endpoint {
	host := addr.String()
	ep := fleet.Endpoint{ID: id, URL: t.Scheme + "://" + net.JoinHostPort(host, strconv.Itoa(port)), Models: t.Models,
		Labels: labels, MaxConcurrency: t.MaxConcurrency, MaxPending: t.MaxPending, KVCapacityBlocks: t.KVCapacityBlocks}
	if t.KVEventsPort != 0 {
		ep.Events = replica.EventStream{Endpoint: "tcp://" + net.JoinHostPort(host, strconv.Itoa(t.KVEventsPort+rank)), Engine: t.Engine}
		if t.KVEventsReplayPort != 0 {
			ep.Events.Replay = "tcp://" + net.JoinHostPort(host, strconv.Itoa(t.KVEventsReplayPort+rank))
		}
	}
	return ep
}

// Sink takes what a source found. *fleet.Fleet satisfies it; tests record.
type Sink interface {
	// SetEndpoints makes the source's members exactly eps.
	SetEndpoints(source string, eps []fleet.Endpoint)
	// SourceFailing records why the source cannot refresh, or with a nil
	// err that it can again.
	SourceFailing(source string, err error)
}

var _ Sink = (*fleet.Fleet)(nil)

// Reporter passes one source's endpoints to its sink and tells the
// operator when the source fails and when it recovers, once each. It is
// safe for concurrent use (informer callbacks and a source's own loop).
type Reporter struct {
	name string
	sink Sink
	log  *slog.Logger

	endpoints *metrics.Gauge
	failing   *metrics.Gauge
	failures  *metrics.Counter
	updates   *metrics.Counter

	mu    sync.Mutex
	last  []fleet.Endpoint // the last set passed on
	set   bool             // whether any was
	cause string           // the current failure's message, "" when none
}

// NewReporter returns the reporter of source name, registering its
// metrics in set: inferrail_discovery_endpoints{source} (the endpoints
// last passed on), inferrail_discovery_failing{source} (1 while it cannot
// refresh), inferrail_discovery_failures_total{source} (failures begun or
// changed) and inferrail_discovery_updates_total{source} (sets passed on).
func NewReporter(name string, sink Sink, log *slog.Logger, set *metrics.Set) *Reporter {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	label := fmt.Sprintf(`{source=%q}`, name)
	return &Reporter{
		name:      name,
		sink:      sink,
		log:       log.With("source", name),
		endpoints: set.GetOrCreateGauge("inferrail_discovery_endpoints"+label, nil),
		failing:   set.GetOrCreateGauge("inferrail_discovery_failing"+label, nil),
		failures:  set.GetOrCreateCounter("inferrail_discovery_failures_total" + label),
		updates:   set.GetOrCreateCounter("inferrail_discovery_updates_total" + label),
	}
}

// Name is the source's name, as the fleet lists it.
func (r *Reporter) Name() string { return r.name }

// Set passes eps on to the sink, unless they equal the last set passed
// on. eps is the sink's once passed.
func (r *Reporter) Set(eps []fleet.Endpoint) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.set && reflect.DeepEqual(eps, r.last) {
		return
	}
	r.last, r.set = eps, true
	r.endpoints.Set(float64(len(eps)))
	r.updates.Inc()
	r.sink.SetEndpoints(r.name, eps)
}

// Fail records that the source cannot refresh: err is what failed and
// cause the likely reason, in words an operator acts on. The first call,
// and one whose message differs from the last, logs at warn level and
// counts a failure; repeats say nothing. The last endpoints stay.
func (r *Reporter) Fail(cause string, err error) {
	msg := cause
	if err != nil {
		msg = cause + ": " + err.Error()
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if msg == r.cause {
		return
	}
	r.cause = msg
	r.failing.Set(1)
	r.failures.Inc()
	r.log.Warn("discovery: "+cause+"; keeping the last endpoints", "err", err, "endpoints", len(r.last))
	r.sink.SourceFailing(r.name, errors.New(msg))
}

// OK records that the source refreshes again, logging it if it was
// failing.
func (r *Reporter) OK() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cause == "" {
		return
	}
	r.cause = ""
	r.failing.Set(0)
	r.log.Info("discovery: refreshing again")
	r.sink.SourceFailing(r.name, nil)
}

// Failing returns the current failure's message, "" when none.
func (r *Reporter) Failing() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.cause
}
