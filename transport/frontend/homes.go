package frontend

import (
	"context"
	"crypto/tls"
	"errors"
	"log/slog"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/actors/fleet"
	"github.com/inferrail/inferrail/actors/replica"
	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/model/responses"
	"github.com/inferrail/inferrail/transport/telemetry"
	"github.com/inferrail/inferrail/transport/upstream"
)

// Homes knows which replica stores each Responses response, for the
// gateway and the endpoint picker alike: the replica that served each
// response id relayed through it, and, for an id it did not relay (one
// from before a restart, or through another instance), the replica that
// answers vLLM's GET /v1/responses/{id} with 200. Safe for concurrent use.
type Homes struct {
	fleet *fleet.Fleet
	met   *telemetry.Registry
	log   *slog.Logger
	pools *pools
	// engineAuth puts a replica's engine key on a lookup; nil leaves the
	// client's Authorization.
	engineAuth func(h *fasthttp.RequestHeader, replica string)
	ring       responseHomes
}

// HomesOptions configure Homes.
type HomesOptions struct {
	Fleet   *fleet.Fleet
	Metrics *telemetry.Registry
	Logger  *slog.Logger // nil discards
	// DialTimeout and TLS reach the replicas (upstream.dial_timeout, and
	// nil for the system's roots).
	DialTimeout time.Duration
	TLS         *tls.Config
}

// NewHomes builds Homes with connection pools of its own, which Close
// closes.
func NewHomes(o HomesOptions) *Homes {
	return newHomes(o.Fleet, o.Metrics, o.Logger, newPools(upstream.Options{DialTimeout: o.DialTimeout, TLS: o.TLS}), nil)
}

func newHomes(fl *fleet.Fleet, met *telemetry.Registry, log *slog.Logger, p *pools,
	engineAuth func(*fasthttp.RequestHeader, string)) *Homes {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Homes{fleet: fl, met: met, log: log, pools: p, engineAuth: engineAuth}
}

// Close closes the pools NewHomes made.
func (h *Homes) Close() { h.pools.close() }

// Home is where a response id lives.
type Home struct {
	// Replica stores the response; "" when no replica said it does.
	Replica string
	// Gone: Replica has left the fleet; the conversation is lost with its
	// engine's memory. Foreign: Replica is in the fleet but serves none of
	// the models asked about (any more).
	Gone, Foreign bool
}

// Pin is the placement of a request that continues a stored response.
type Pin struct {
	// ID is the body's previous_response_id; "" when it continues none,
	// and then the rest is zero.
	ID   string
	Home Home
	// Exclude is, when Home is a live replica, every other replica of the
	// model: the Exclude list of the request's decisions.
	Exclude []string
}

// Place finds where a request body for model continues a stored
// response (its previous_response_id), asking the replicas with authz (the
// client's Authorization header) when it did not relay the id.
func (h *Homes) Place(ctx context.Context, model string, body []byte, authz string, deadline time.Time) Pin {
	f, err := openai.FindMember(body, "previous_response_id")
	if err != nil || !f.Found || !f.IsString || f.Name == "" {
		return Pin{}
	}
	p := Pin{ID: f.Name}
	p.Home = h.Locate(ctx, p.ID, func(m string) bool { return m == model }, authz, deadline)
	// A home that no longer serves the model has lost the conversation for it.
	p.Home.Gone = p.Home.Gone || p.Home.Foreign
	if p.Home.Replica == "" || p.Home.Gone {
		return p
	}
	for _, snap := range h.fleet.Replicas() {
		if snap.ID != p.Home.Replica && snap.Serves(model) {
			p.Exclude = append(p.Exclude, snap.ID)
		}
	}
	return p
}

// Locate finds the replica that stores id, of those serving a model
// serves accepts: the one remembered, or the first of them that answers
// GET /v1/responses/{id} with 200 within responseLookupWait (or by
// deadline, when sooner). A remembered replica that has left the fleet
// is Gone, one that serves no model accepted (any more) Foreign.
func (h *Homes) Locate(ctx context.Context, id string, serves func(model string) bool, authz string, deadline time.Time) Home {
	if home, ok := h.ring.get(id); ok {
		snap, live := h.fleet.Snapshot(home)
		return Home{Replica: home, Gone: !live, Foreign: live && !servesAny(snap.Models, serves)}
	}
	home, ok := h.lookup(ctx, id, serves, authz, deadline)
	if !ok {
		return Home{}
	}
	h.ring.put(id, home)
	return Home{Replica: home}
}

func servesAny(models []string, serves func(string) bool) bool {
	for _, m := range models {
		if serves(m) {
			return true
		}
	}
	return false
}

// Remember notes that replica served the response answer names (a body,
// or a stream's first bytes), when the request (body) asked to store it
// and the engine answered 200.
func (h *Homes) Remember(body []byte, rep string, status int, answer []byte) {
	if status != fasthttp.StatusOK {
		return
	}
	if f, err := openai.FindMember(body, "store"); err == nil && f.Found && string(body[f.Start:f.End]) == "false" {
		return
	}
	if id := responses.ID(answer); id != "" {
		h.ring.put(id, rep)
	}
}

// lookup asks every replica serving an accepted model, at once, whether
// it stores id, with authz and the replica's engine key. A replica that
// answers neither 200 nor 404 in time (it is unreachable, slow, or
// refuses the lookup) is counted in
// inferrail_response_lookup_failures_total: a conversation it holds
// would be routed as if no replica held it.
func (h *Homes) lookup(ctx context.Context, id string, serves func(string) bool, authz string, deadline time.Time) (string, bool) {
	if d := time.Now().Add(responseLookupWait); d.Before(deadline) {
		deadline = d
	}
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	uri := pathResponses + "/" + url.PathEscape(id)
	found := make(chan string, 1)
	var done atomic.Bool // found: the others' cancelled lookups are no failures
	var wg sync.WaitGroup
	for _, snap := range h.fleet.Replicas() {
		if !servesAny(snap.Models, serves) {
			continue
		}
		pool, err := h.pools.get(snap.URL)
		if err != nil {
			h.failed(snap.ID, id, err)
			continue
		}
		wg.Add(1)
		go func(rep string) {
			defer wg.Done()
			req := fasthttp.AcquireRequest()
			defer fasthttp.ReleaseRequest(req)
			req.Header.SetMethod(fasthttp.MethodGet)
			req.SetRequestURI(uri)
			if authz != "" {
				req.Header.Set("Authorization", authz)
			}
			if h.engineAuth != nil {
				h.engineAuth(&req.Header, rep)
			}
			resp, err := pool.Do(ctx, req)
			if err != nil {
				if !done.Load() {
					h.failed(rep, id, err)
				}
				return
			}
			status := resp.StatusCode()
			resp.Close()
			switch status {
			case fasthttp.StatusOK:
				h.answered(rep)
				select {
				case found <- rep:
					done.Store(true)
					cancel() // the others need not answer
				default:
				}
			case fasthttp.StatusNotFound:
				h.answered(rep)
			default:
				h.failed(rep, id, errors.New("answered "+fasthttp.StatusMessage(status)))
			}
		}(snap.ID)
	}
	wg.Wait()
	select {
	case home := <-found:
		return home, true
	default:
		return "", false
	}
}

// failed counts one replica's failed lookup, and raises
// replica.WarnResponseLookup on it (logged once).
func (h *Homes) failed(rep, id string, err error) {
	if h.met != nil {
		h.met.ResponseLookupFailed(rep)
	}
	h.log.Debug("response lookup failed", "replica", rep, "response_id", id, "err", err)
	if snap, ok := h.fleet.Snapshot(rep); ok {
		snap.Warnings.Raise(h.log, time.Now(), replica.WarnResponseLookup,
			"the replica fails the lookups of Responses ids (GET /v1/responses/{id}): a conversation it stores is routed as if no replica held it",
			"replica", rep)
	}
}

// answered clears replica.WarnResponseLookup on a replica that answered
// a lookup.
func (h *Homes) answered(rep string) {
	if snap, ok := h.fleet.Snapshot(rep); ok && snap.Warnings.Active(replica.WarnResponseLookup) {
		snap.Warnings.Clear(h.log, replica.WarnResponseLookup)
	}
}

// responseHomes maps the ids of the responses the gateway relayed to the
// replicas that served them. Safe for concurrent use; the zero value is
// ready.
type responseHomes struct {
	mu    sync.Mutex
	home  map[string]string
	order []string // a ring of the ids held, oldest at next
	next  int
}

func (h *responseHomes) put(id, replica string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.home == nil {
		h.home = make(map[string]string)
		h.order = make([]string, 0, 1024)
	}
	if _, ok := h.home[id]; ok {
		h.home[id] = replica
		return
	}
	if len(h.order) < maxResponseHomes {
		h.order = append(h.order, id)
	} else {
		delete(h.home, h.order[h.next])
		h.order[h.next] = id
		h.next = (h.next + 1) % maxResponseHomes
	}
	h.home[id] = replica
}

func (h *responseHomes) get(id string) (string, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	r, ok := h.home[id]
	return r, ok
}

// pools holds one connection pool per replica base URL, each made on
// first use. Safe for concurrent use.
type pools struct {
	opts upstream.Options
	mu   sync.RWMutex
	m    map[string]*upstream.Pool
}

func newPools(o upstream.Options) *pools {
	return &pools{opts: o, m: make(map[string]*upstream.Pool)}
}

func (p *pools) get(url string) (*upstream.Pool, error) {
	p.mu.RLock()
	pl := p.m[url]
	p.mu.RUnlock()
	if pl != nil {
		return pl, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if pl = p.m[url]; pl != nil {
		return pl, nil
	}
	pl, err := upstream.NewPool(url, p.opts)
	if err != nil {
		return nil, err
	}
	p.m[url] = pl
	return pl, nil
}

func (p *pools) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, pl := range p.m {
		pl.Close()
	}
	clear(p.m)
}
