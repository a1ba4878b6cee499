package replica

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"github.com/asynkron/protoactor-go/actor"

	"github.com/inferrail/inferrail/actors/mailbox"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/estimate"
	"github.com/inferrail/inferrail/model/load"
)

// Config is what every replica actor of a fleet shares. It is read-only once
// passed to Props.
type Config struct {
	// Health holds the probe interval and timeout, the failure threshold
	// and the ejection backoff.
	Health config.Health
	// Prober checks the engine. Nil turns active probing off: the replica
	// stays healthy as far as probes go.
	Prober Prober
	// Budget caps ejections per model. Nil gives each actor a budget of
	// its own, which caps nothing across replicas.
	Budget *Budget
	// Now is the clock ejections are timed by. Nil means time.Now.
	Now func() time.Time
	// Logger gets health changes and ejections. Nil discards them.
	Logger *slog.Logger
	// Goroutines joins the actors' prober goroutines. Its owner waits on it
	// after stopping every actor that uses it. Required.
	Goroutines *sync.WaitGroup
	// Metrics are the counters the actors update. Nil counts into a set of
	// their own.
	Metrics *Metrics
	// Scraper reads the engines' /metrics pages. Nil turns scraping off:
	// snapshots then carry no load report.
	Scraper Scraper
	// Load holds the scrape interval and timeout.
	Load config.LoadSignals
	// IndexCapacity is index.default_capacity_blocks: the shadow index's
	// size for a replica without kv_capacity_blocks whose engine reports no
	// KV capacity. At most 0 takes 16384.
	IndexCapacity int
	// Events subscribes replicas with a KV event stream (Handle.SetEvents)
	// to it. Nil turns events off: shadow indexes follow routing decisions
	// alone.
	Events EventSource
	// EventChecks are what each model's KV events are checked against
	// (models[].block_size and the size of the model tokenizer's
	// vocabulary), by configured model name; a replica's events are
	// checked for its first model. A model not listed is not checked.
	EventChecks map[string]estimate.EventChecks
	// EventsQuiet is how long a subscription may deliver nothing while the
	// engine completes requests before WarnEventsSilent is raised. At most
	// 0 takes 30s.
	EventsQuiet time.Duration
	// SpeculativeTTL is kv_events.speculative_ttl: how long a routing
	// decision's blocks count as cached on a replica in exact mode before
	// its engine's event confirms them. At most 0 records no decision in
	// exact mode: the prediction follows the events alone.
	SpeculativeTTL time.Duration
	// MaxSilence is kv_events.max_silence: how long a replica in exact
	// mode may get no batch after its engine completed a request that
	// stored blocks before it falls back to the approximate index. At most
	// 0 takes 2s.
	MaxSilence time.Duration
	// NoTokenizer lists the models, by configured name, that have no
	// tokenizer (none configured, or it failed to load): the gateway maps
	// only their prompts of token ids to blocks. A replica of one with KV
	// events reports IndexNoTokenizer until such a prompt comes.
	NoTokenizer map[string]bool
}

// Metrics are the counters replica actors update; safe for concurrent use.
type Metrics struct {
	Restarts  *metrics.Counter // inferrail_replica_restarts_total
	Ejections *metrics.Counter // inferrail_ejections_total
	Unhandled *metrics.Counter // inferrail_actor_unhandled_messages_total{actor="replica"}
}

// NewMetrics returns the replica counters, registered in set (created there
// once and shared when they already are).
func NewMetrics(set *metrics.Set) *Metrics {
	return &Metrics{
		Restarts:  set.GetOrCreateCounter("inferrail_replica_restarts_total"),
		Ejections: set.GetOrCreateCounter("inferrail_ejections_total"),
		Unhandled: set.GetOrCreateCounter(`inferrail_actor_unhandled_messages_total{actor="replica"}`),
	}
}

// Supervisor is the strategy a replica actor's parent supervises it with:
// a panicking actor is restarted as new (healthy, not ejected, with the same
// Handle and Counters), up to 10 times a minute. Past that the actor is
// stopped, and its last snapshot says unhealthy.
func Supervisor() actor.SupervisorStrategy {
	return actor.NewOneForOneStrategy(10, time.Minute, actor.DefaultDecider)
}

// Props returns the props of the actor for the replica h. Every incarnation
// of the actor (after each restart) publishes through the same h.
func Props(h *Handle, cfg Config) *actor.Props {
	if cfg.Goroutines == nil {
		panic("BUG: replica.Props: nil Config.Goroutines")
	}
	if cfg.Prober != nil && cfg.Health.Interval <= 0 {
		panic("BUG: replica.Props: health.interval is not positive")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Metrics == nil {
		cfg.Metrics = NewMetrics(metrics.NewSet())
	}
	if cfg.Budget == nil {
		cfg.Budget = NewBudget(cfg.Health.MaxEjectionPercent)
	}
	cfg.Health.UnhealthyThreshold = max(cfg.Health.UnhealthyThreshold, 1)
	cfg.Health.MaxEjectionBackoff = max(cfg.Health.MaxEjectionBackoff, cfg.Health.EjectionBackoff)
	if cfg.Health.Timeout <= 0 {
		cfg.Health.Timeout = cfg.Health.Interval
	}
	if cfg.Scraper != nil && cfg.Load.ScrapeInterval <= 0 {
		panic("BUG: replica.Props: load.scrape_interval is not positive")
	}
	if cfg.IndexCapacity <= 0 {
		cfg.IndexCapacity = 16384
	}
	if cfg.Load.ScrapeTimeout <= 0 {
		cfg.Load.ScrapeTimeout = cfg.Load.ScrapeInterval
	}
	if cfg.EventsQuiet <= 0 {
		cfg.EventsQuiet = 30 * time.Second
	}
	if cfg.MaxSilence <= 0 {
		cfg.MaxSilence = 2 * time.Second
	}
	shared := &cfg
	return actor.PropsFromProducer(func() actor.Actor {
		s := h.Snapshot()
		return &replicaActor{
			cfg: shared, h: h, id: s.ID, url: s.URL, models: s.Models, counters: s.Counters,
			scrapes: s.Scrapes, shadow: s.Shadow, stream: s.Events, eventCounts: s.EventCounts,
			warnings: s.Warnings, labels: s.Labels, log: shared.Logger.With("replica", s.ID),
		}
	}, actor.WithMailbox(mailbox.New))
}

// replicaActor owns one replica's health, ejection and cards. Its fields are
// touched only inside Receive.
type replicaActor struct {
	cfg *Config
	h   *Handle
	log *slog.Logger

	// From the replica's first snapshot; never change.
	id, url  string
	models   []string
	labels   map[string]string
	counters *Counters
	warnings *Warnings // shared by every snapshot; safe for concurrent use

	healthy      bool
	probeFails   int // consecutive failed probes
	reqFails     int // consecutive failed requests while in rotation
	ejectedUntil time.Time
	ejections    int
	backoff      time.Duration // the next ejection's length
	cards        map[string][]byte
	restarts     int

	probe *probeRun // the running prober; nil when none

	// The engine's own view, from its /metrics page.
	scrape         *scrapeRun // the running scrape loop; nil when none
	scrapes        *ScrapeCounts
	load           load.Report
	loadAt         time.Time // when the last good scrape began; zero before one
	loadInFlight   int       // the requests in flight then
	scrapeFailing  bool
	engineRestarts int
	// The last engine restart noticed, when and how (restartBy*), so that
	// the metrics and the KV events noticing one restart count it once.
	restartAt time.Time
	restartBy int

	// The shadow state: what was routed here, for cost estimates. A new
	// incarnation starts it empty.
	est    *estimate.Replica
	shadow *Shadow
	// calibFrom is the Shadow.calib the fit was last synced to.
	calibFrom *cost.Model

	// The engine's KV events, applied to est.Index through mirror.
	stream      EventStream
	events      *eventsRun // the running subscription; nil when none
	lastEvents  *eventsRun // the last subscription started, stopped or not: a new one waits for it to close
	mirror      *estimate.Events
	eventCounts *EventCounts
	gapLogged   bool
	// For the event warnings (eventsChecked): the mapping's stats when the
	// current window of stored blocks began; whether anything came from
	// the subscription, whether EventsQuiet has passed since it started,
	// and how many requests the engine completed meanwhile.
	window     estimate.EventStats
	eventsSeen bool
	quietDue   bool
	served     int

	// The index's mode and what moves it (mode.go): whether events were
	// lost since the mapping was rebuilt, so that a resync must show it in
	// step (from the mapping's stats at resyncFrom); whether the current
	// subscription delivered yet; when the last batch arrived; since when
	// one is overdue (zero when none is); whether the replica was ever
	// exact, so that a return counts as a resync.
	mode         IndexMode
	lossy        bool
	resyncFrom   estimate.EventStats
	subscribed   bool
	lastBatchAt  time.Time
	overdueSince time.Time
	everExact    bool
	// blind: events are configured, but the model has no tokenizer and no
	// prompt mapped to blocks has come (checkBlind, mapped).
	blind bool

	// shared judges from the scrapes whether another router sends the
	// engine requests too; sharedEngine is the verdict published
	// (isShared, checkShared).
	shared       load.Shared
	sharedEngine bool
}

// Receive handles one message. It never blocks.
func (a *replicaActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *Estimate:
		a.estimate(m)
	case *Assign:
		a.assign(m)
	case *FirstByte:
		a.firstByte(m)
	case *RequestDone:
		a.attemptEnded(m.Attempt, m.Outcome)
		a.requestDone(m)
	case *DumpIndex:
		ctx.Respond(a.dumpIndex())
	case *WarmIndex:
		a.warmIndex(ctx, m.Replica)
	case *probed:
		a.probed(m)
	case *scraped:
		a.scraped(m)
	case *eventsBatch:
		a.eventsApplied(m)
	case *eventsGap:
		a.eventsLost(m)
	case *eventsFailed:
		a.eventsFailed(m)
	case *eventsQuiet:
		a.eventsQuietFor(m)
	case *actor.Started:
		a.started(ctx)
	case *actor.Stopping:
		a.stopProber()
		a.stopScraper()
		a.stopEvents()
	case *actor.Restarting:
		a.restarting()
	case *actor.Stopped:
		a.stopped()
	case *actor.Touch:
		// protoactor answers it once it is processed: a barrier for tests.
	case *crash:
		panic("BUG: replica: crash requested by a test")
	default:
		a.cfg.Metrics.Unhandled.Inc()
		a.log.Warn("replica: unhandled message", "type", fmt.Sprintf("%T", m))
	}
}

// started sets up a new incarnation: the first one, or one after a restart,
// which starts as fresh (healthy, not ejected, base backoff) but keeps the
// restart count and the cards of the snapshot it replaces.
func (a *replicaActor) started(ctx actor.Context) {
	prev := a.h.Snapshot()
	a.restarts, a.cards = prev.Restarts, prev.Cards
	a.load, a.loadAt, a.loadInFlight, a.engineRestarts = prev.Load, prev.LoadAt, prev.LoadInFlight, prev.EngineRestarts
	a.healthy = true
	a.backoff = a.cfg.Health.EjectionBackoff
	a.mode = IndexApproximate
	a.est = estimate.New(a.capacity())
	a.checkBlind()
	a.publishShadow(a.cfg.Now())
	a.cfg.Budget.JoinAs(a.id, a.models, a.h)
	a.publish()
	a.startScraper(ctx)
	a.startEvents(ctx)
	if a.cfg.Prober == nil {
		return
	}
	pctx, cancel := context.WithCancel(context.Background())
	run := &probeRun{cancel: cancel}
	a.probe = run
	send, self := actor.SenderContext(ctx.ActorSystem().Root), ctx.Self()
	p, url, hc := a.cfg.Prober, a.url, a.cfg.Health
	a.cfg.Goroutines.Go(func() { probeLoop(pctx, run, send, self, p, url, hc.Interval, hc.Timeout) })
}

func (a *replicaActor) stopProber() {
	if a.probe != nil {
		a.probe.cancel()
		a.probe = nil
	}
}

// restarting runs on the failed incarnation before its replacement starts.
func (a *replicaActor) restarting() {
	a.stopProber()
	a.stopScraper()
	a.stopEvents()
	a.restarts++
	a.cfg.Metrics.Restarts.Inc()
	a.log.Warn("replica actor restarted after a panic", "restarts", a.restarts)
	a.publish()
}

// stopped runs once the actor has stopped for good: the replica left the
// fleet, the fleet stopped, or its supervisor gave up on it.
func (a *replicaActor) stopped() {
	a.stopProber()
	a.stopScraper()
	a.stopEvents()
	a.cfg.Budget.LeaveAs(a.id, a.h)
	a.healthy = false
	a.publish()
}

func (a *replicaActor) probed(m *probed) {
	if m.run != a.probe {
		return // from a prober that was stopped
	}
	changed := false
	if m.err != nil {
		a.probeFails++
		changed = true
		if a.healthy && a.probeFails >= a.cfg.Health.UnhealthyThreshold {
			a.healthy = false
			a.cfg.Budget.SetHealthy(a.id, false)
			a.log.Warn("replica unhealthy", "failed_probes", a.probeFails, "err", m.err)
		}
	} else {
		if a.probeFails != 0 {
			a.probeFails, changed = 0, true
		}
		if !a.healthy {
			a.healthy, changed = true, true
			a.cfg.Budget.SetHealthy(a.id, true)
			a.log.Info("replica healthy again")
		}
		if m.cards != nil {
			a.cards, changed = m.cards, true
		}
	}
	if changed {
		a.publish()
	}
}

func (a *replicaActor) requestDone(m *RequestDone) {
	now := a.cfg.Now()
	ejected := now.Before(a.ejectedUntil)
	switch m.Outcome {
	case OutcomeOK:
		a.served++
		a.completed(m.Attempt, now)
		a.exactTick(now)
		if a.quietDue {
			a.checkSilent()
		}
		// The first success after a readmission forgives the earlier
		// ejections.
		if !ejected {
			a.backoff = a.cfg.Health.EjectionBackoff
		}
		if a.reqFails != 0 {
			a.reqFails = 0
			a.publish()
		}
	case OutcomeFailed:
		if ejected {
			return // an attempt from before the ejection; already counted
		}
		a.reqFails++
		if a.reqFails >= a.cfg.Health.UnhealthyThreshold {
			a.eject(now)
		}
		a.publish()
	}
}

// eject takes the replica out of rotation for the current backoff, if the
// budget lets it, and doubles the backoff for the next time.
func (a *replicaActor) eject(now time.Time) {
	until := now.Add(a.backoff)
	if !a.cfg.Budget.TryEject(a.id, until, now) {
		a.log.Debug("replica not ejected: max_ejection_percent reached", "failed_requests", a.reqFails)
		return
	}
	a.log.Warn("replica ejected", "for", a.backoff, "failed_requests", a.reqFails)
	a.ejectedUntil = until
	a.ejections++
	a.reqFails = 0
	a.backoff = min(2*a.backoff, a.cfg.Health.MaxEjectionBackoff)
	a.cfg.Metrics.Ejections.Inc()
}

func (a *replicaActor) publish() {
	a.h.publish(&Snapshot{
		ID:              a.id,
		URL:             a.url,
		Models:          a.models,
		Labels:          a.labels,
		Healthy:         a.healthy,
		ProbeFailures:   a.probeFails,
		RequestFailures: a.reqFails,
		EjectedUntil:    a.ejectedUntil,
		Ejections:       a.ejections,
		Cards:           a.cards,
		Restarts:        a.restarts,
		Counters:        a.counters,
		Load:            a.load,
		LoadAt:          a.loadAt,
		LoadInFlight:    a.loadInFlight,
		LoadFailing:     a.scrapeFailing,
		EngineRestarts:  a.engineRestarts,
		Scrapes:         a.scrapes,
		Shadow:          a.shadow,
		Events:          a.stream,
		EventCounts:     a.eventCounts,
		Warnings:        a.warnings,
		IndexMode:       a.indexMode(),
		SharedEngine:    a.sharedEngine,
	})
}
