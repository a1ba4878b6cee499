package load

// Shared judges, from an engine's successive load reports, whether the
// engine also serves requests this gateway did not send it: another router
// (a second gateway instance, behind any balancer) or a client that reaches
// it directly (issue 32). A scrape shows someone else's requests when
//
//   - the engine's running + waiting is above the most requests the gateway
//     had in flight to it while the page was read, none having started
//     meanwhile (one could come and go unseen): one gateway alone never
//     has fewer, since its count takes a request before the engine sees it
//     and releases it after the engine's last byte; or
//   - the engine's prefix-cache queries (the prompt tokens it admitted) grew
//     since the last scrape while the gateway had nothing there: nothing in
//     flight when the last page was read and nothing sent since. An engine
//     counts a request's queries when it admits it, and reports them before
//     its last byte, so a lone gateway's requests are never counted then.
//
// SharedRaise such scrapes within a window of SharedWindow make the
// verdict, and SharedQuiet whole windows in a row without one end it: a
// second router at a low rate shows itself only now and then.
//
// A Shared is owned by one replica actor (or one simulated gateway) and is
// not safe for concurrent use; the zero value is ready.
type Shared struct {
	scrapes, excess int // in the current window
	quiet           int // windows in a row without excess, while active
	active          bool
	// last is the window that made the verdict: excess scrapes of how
	// many, for the warning's message.
	lastExcess, lastOf int
}

// SharedScrape is what one scrape tells Shared.
type SharedScrape struct {
	// Engine is the engine's running + waiting requests; Ours the most
	// requests the gateway had in flight to it while the page was read,
	// and Steady that none started meanwhile.
	Engine float64
	Ours   int
	Steady bool
	// Queries is how many prefix-cache queries (tokens) the engine
	// counted since the last scrape; 0 when unknown (a page without
	// them, the first page, a restarted engine). Idle reports that the
	// gateway had nothing in flight to the engine when the last page was
	// read and sent it nothing since.
	Queries float64
	Idle    bool
}

const (
	// SharedWindow is how many scrapes a verdict is taken over: 5 s at the
	// default load.scrape_interval of 100 ms.
	SharedWindow = 50
	// SharedRaise is how many scrapes of a window must show another
	// router's requests. Neither sign appears for a lone gateway's own
	// requests; two instances at 4 requests a second over three engines
	// show about three a window on each engine.
	SharedRaise = 2
	// SharedQuiet is how many whole windows in a row without a sign end
	// the verdict: 30 s at the default scrape interval.
	SharedQuiet = 6
)

// Observe records one scrape. It reports whether the verdict changed.
func (s *Shared) Observe(o SharedScrape) bool {
	s.scrapes++
	if o.Steady && o.Engine >= float64(o.Ours)+1 || o.Idle && o.Queries > 0 {
		s.excess++
	}
	changed := false
	if !s.active && s.excess >= SharedRaise {
		s.active, changed = true, true
		s.lastExcess, s.lastOf = s.excess, s.scrapes
	}
	if s.scrapes >= SharedWindow {
		switch {
		case !s.active:
		case s.excess > 0:
			s.quiet = 0
			s.lastExcess, s.lastOf = s.excess, s.scrapes
		default:
			if s.quiet++; s.quiet >= SharedQuiet {
				s.active, s.quiet, changed = false, 0, true
			}
		}
		s.scrapes, s.excess = 0, 0
	}
	return changed
}

// Active reports whether the engine is judged shared.
func (s *Shared) Active() bool { return s.active }

// Seen is the window behind the verdict: how many of its scrapes showed
// another router's requests.
func (s *Shared) Seen() (excess, of int) { return s.lastExcess, s.lastOf }
