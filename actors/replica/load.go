package replica

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"time"

	"github.com/asynkron/protoactor-go/actor"

	"github.com/inferrail/inferrail/model/load"
)

// Scraper reads an engine's load report from GET {url}/metrics within ctx.
// transport/scrape implements it; tests use fakes.
type Scraper interface {
	Scrape(ctx context.Context, url string) (load.Report, error)
}

// ScrapeCounts count a replica's engine scrapes by result, for
// inferrail_load_scrapes_total. Shared by pointer across the replica's
// snapshots; safe for concurrent use.
type ScrapeCounts struct {
	OK, Unreadable, Failed atomic.Uint64
}

// scrapeRun is one incarnation's scrape goroutine, like probeRun.
type scrapeRun struct {
	cancel context.CancelFunc
}

// scrapeLoop scrapes url every interval until ctx ends, each scrape bounded
// by timeout, sending each result to the actor at self. The first scrape
// comes at a random point of the first interval, so that a fleet's replicas
// do not all scrape in the same instant. A slow or hostile engine delays
// only its own loop.
func scrapeLoop(ctx context.Context, run *scrapeRun, send actor.SenderContext, self *actor.PID,
	s Scraper, url string, counters *Counters, interval, timeout time.Duration) {
	first := time.NewTimer(rand.N(interval))
	select {
	case <-ctx.Done():
		first.Stop()
		return
	case <-first.C:
	}
	tick := time.NewTicker(interval)
	defer tick.Stop()
	// The last scrape's count after its page was read, and the requests
	// started by then, for the shared-engine check's idle sign.
	lastAfter, lastStarted, primed := 0, uint64(0), false
	for {
		at, before, startedBefore := time.Now(), counters.InFlight(), counters.Started()
		sctx, cancel := context.WithTimeout(ctx, timeout)
		rep, err := s.Scrape(sctx, url)
		cancel()
		// The fewer of the counts before and after: requests that finished
		// while the page was read may be on it, and flow control must not
		// think the engine emptier than it is (flow.Endpoint). The more
		// of them bounds what the page can count of the gateway's own.
		after, started := counters.InFlight(), counters.Started()
		idle := primed && lastAfter == 0 && started == lastStarted
		lastAfter, lastStarted, primed = after, started, true
		if ctx.Err() != nil {
			return
		}
		send.Send(self, &scraped{run: run, report: rep, at: at, inFlight: min(before, after),
			inFlightMax: max(before, after), steady: started == startedBefore, idle: idle, err: err})
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
	}
}

// scraped records one scrape. A failing engine is logged once when it stops
// answering and once when it recovers; an engine whose prefix cache counters
// went backwards is counted as restarted. A page that answers but cannot be
// read raises WarnMetricsUnreadable, naming the families routing needs that
// it lacks; a page read without some optional families raises
// WarnMetricsPartial, naming them. Each is logged once, again when what it
// names changes, and cleared when the page is whole again.
func (a *replicaActor) scraped(m *scraped) {
	if m.run != a.scrape {
		return // from a scrape loop that was stopped
	}
	// A replica that gets no request still takes up a change of its
	// calibration (a reload turning auto off) within a scrape interval.
	a.syncCalibration()
	if m.err != nil {
		unreadable := errors.Is(m.err, load.ErrUnreadable)
		if unreadable {
			a.scrapes.Unreadable.Add(1)
			a.warnings.Raise(a.log, a.cfg.Now(), WarnMetricsUnreadable, unreadableMessage(m.err), "err", m.err)
			a.warnings.Clear(a.log, WarnMetricsPartial) // what is missing is now said above
		} else {
			a.scrapes.Failed.Add(1)
		}
		if !a.scrapeFailing {
			a.scrapeFailing = true
			if !unreadable {
				a.log.Warn("engine metrics unavailable; routing falls back to the gateway's own counts", "err", m.err)
			}
			a.publish()
		}
		return
	}
	a.scrapes.OK.Add(1)
	if a.scrapeFailing {
		a.scrapeFailing = false
		a.log.Info("engine metrics available again")
	}
	a.warnings.Clear(a.log, WarnMetricsUnreadable)
	if missing := m.report.MissingNames(); len(missing) > 0 {
		a.warnings.Raise(a.log, a.cfg.Now(), WarnMetricsPartial, partialMessage(m.report, missing))
	} else {
		a.warnings.Clear(a.log, WarnMetricsPartial)
	}
	if !a.loadAt.IsZero() && load.Restarted(a.load, m.report) && a.engineRestarted(restartByMetrics) {
		a.engineRestarts++
		a.log.Info("engine restarted: its prefix cache counters went backwards; its shadow index is cleared")
	}
	sc := load.SharedScrape{Engine: m.report.Running + m.report.Waiting, Ours: m.inFlightMax, Steady: m.steady, Idle: m.idle}
	if !a.loadAt.IsZero() && a.load.Has(load.FieldPrefix) && m.report.Has(load.FieldPrefix) {
		sc.Queries = max(m.report.PrefixQueries-a.load.PrefixQueries, 0) // 0 for a restarted engine
	}
	a.load, a.loadAt, a.loadInFlight = m.report, m.at, m.inFlight
	if a.shared.Observe(sc) || a.sharedEngine != a.isShared() {
		a.checkShared()
	}
	if c := a.capacity(); c != a.est.Index.Capacity() {
		a.est.Index.SetCapacity(c)
		a.publishShadow(a.cfg.Now())
	}
	a.publish()
}

// isShared reports whether the engine is found serving another router's
// requests (load.Shared) while the index follows routing decisions: an
// exact index follows the engine's own events, which another router's
// requests cannot mislead.
func (a *replicaActor) isShared() bool { return a.shared.Active() && a.mode != IndexExact }

// checkShared raises or clears WarnSharedEngines as isShared says, and
// publishes the verdict, which turns cost_model's cold rendezvous on
// (policy.Candidate.Shared).
func (a *replicaActor) checkShared() {
	a.sharedEngine = a.isShared()
	if a.sharedEngine {
		excess, of := a.shared.Seen()
		a.warnings.Raise(a.log, a.cfg.Now(), WarnSharedEngines, fmt.Sprintf(
			"the engine runs more requests than this gateway sent it (in %d of %d scrapes): another router or "+
				"client sends it requests too, such as a second gateway instance behind a load balancer, and this "+
				"gateway's cache predictions, fed by its own decisions alone, miss what the others placed; "+
				"remedies: configure kv_events on every replica, so that every instance follows what the engines "+
				"cache, or set routing.cold_rendezvous, so that instances place new prefixes alike (cost_model "+
				"does so on its own while this warning holds)", excess, of))
	} else {
		a.warnings.Clear(a.log, WarnSharedEngines)
	}
}

// unreadableMessage is WarnMetricsUnreadable's message for err: the
// families the page lacks when that is why, so that the message changes,
// and is logged again, only when they do.
func unreadableMessage(err error) string {
	const fallback = "; routing falls back to the gateway's own counts"
	var me *load.MissingError
	if errors.As(err, &me) {
		return "engine metrics page lacks " + strings.Join(me.Families, ", ") + ", which routing needs" + fallback
	}
	return "engine metrics page unreadable: " + err.Error() + fallback
}

// partialMessage is WarnMetricsPartial's message: the optional families
// the page lacks, named, and what the gateway does without them.
func partialMessage(r load.Report, names []string) string {
	msg := "engine metrics page lacks " + strings.Join(names, ", ") + "; routing uses its load without them"
	if !r.Has(load.FieldPrefix) && !r.Has(load.FieldPreemptions) {
		msg += "; engine restarts are not seen from its counters"
	}
	if r.Missing&load.FamCapacity != 0 {
		msg += "; the index capacity comes from the config, not the engine"
	}
	return msg
}

// startScraper starts this incarnation's scrape loop, when scraping is on.
func (a *replicaActor) startScraper(ctx actor.Context) {
	if a.cfg.Scraper == nil {
		return
	}
	sctx, cancel := context.WithCancel(context.Background())
	run := &scrapeRun{cancel: cancel}
	a.scrape = run
	send, self := actor.SenderContext(ctx.ActorSystem().Root), ctx.Self()
	s, url, lc := a.cfg.Scraper, a.url, a.cfg.Load
	a.cfg.Goroutines.Go(func() { scrapeLoop(sctx, run, send, self, s, url, a.counters, lc.ScrapeInterval, lc.ScrapeTimeout) })
}

func (a *replicaActor) stopScraper() {
	if a.scrape != nil {
		a.scrape.cancel()
		a.scrape = nil
	}
}

// FreshLoad returns the engine's last load report while it is at most
// maxAge old at now (load.max_age); otherwise ok is false and readers fall
// back to the gateway's own counts.
func (s *Snapshot) FreshLoad(now time.Time, maxAge time.Duration) (r load.Report, ok bool) {
	if !s.LoadFresh(now, maxAge) {
		return load.Report{}, false
	}
	return s.Load, true
}

// LoadFresh reports whether FreshLoad would return the report: whether
// s.Load is at most maxAge old at now. A caller that reads a few of its
// fields reads them in place, without FreshLoad's copy.
func (s *Snapshot) LoadFresh(now time.Time, maxAge time.Duration) bool {
	return !s.LoadAt.IsZero() && load.Fresh(s.LoadAt, now, maxAge)
}
