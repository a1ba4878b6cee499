package scrape

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/inferrail/inferrail/model/load"
)

// Loop scrapes one replica every Interval until its context ends. Its
// fields are set before Run and not changed after.
//
// The replica actor owns the Loop: it runs Run on a goroutine of its own,
// stops it by cancelling the context it passed and joins it with a
// WaitGroup. Run returns as soon as the context ends: the scrape under way
// is cancelled with it.
type Loop struct {
	Scraper *Scraper // required
	// URL is the replica's base URL, such as http://10.0.0.7:8000.
	URL string
	// Interval is load.scrape_interval. The first scrape begins at a
	// random point of the first Interval, and the next every Interval
	// after that (at once after a scrape that took longer). The random
	// phase spreads the loops of a fleet that starts together over the
	// interval, instead of dialling every replica in the same instant and
	// scraping them all at once ten times a second; a replica has no
	// report before its first scrape anyway. Must be positive.
	Interval time.Duration
	// Timeout is load.scrape_timeout, the most one scrape may take.
	// Must be positive.
	Timeout time.Duration
	// MaxBackoff, when positive, slows the scrapes of a replica that keeps
	// failing: from the third failure in a row, the wait before the next
	// scrape doubles with each failure, from 2*Interval up to MaxBackoff;
	// the first success restores Interval. An engine that serves endless
	// pages then costs a 4 MiB read every MaxBackoff rather than every
	// Interval, and its recovery is seen within MaxBackoff. Zero keeps
	// Interval whatever happens.
	MaxBackoff time.Duration
	// Report receives each scrape's outcome, in order, on the Loop's
	// goroutine: the report and the time its scrape began, or the error
	// (and the same time). The time is the scrape's start, so that a
	// report's age is never understated. Report must not block; an actor
	// sends itself a message and returns. A scrape cut short by the end of
	// Run's context is not reported.
	Report func(r load.Report, at time.Time, err error)
}

// failuresBeforeBackoff is how many failures in a row are taken for a
// passing fault: an engine restarting, a connection reset.
const failuresBeforeBackoff = 2

// Run scrapes until ctx ends.
func (l *Loop) Run(ctx context.Context) {
	if l.Interval <= 0 || l.Timeout <= 0 || l.Scraper == nil || l.Report == nil {
		panic(fmt.Sprintf("BUG: scrape: loop for %s: needs a Scraper, a Report and a positive interval (%v) and timeout (%v)",
			l.URL, l.Interval, l.Timeout))
	}
	next := time.NewTimer(rand.N(l.Interval)) // the phase
	defer next.Stop()
	failures := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-next.C:
		}
		at := time.Now()
		sctx, cancel := context.WithTimeout(ctx, l.Timeout)
		r, err := l.Scraper.Scrape(sctx, l.URL)
		cancel()
		if ctx.Err() != nil {
			return
		}
		l.Report(r, at, err)
		if err == nil {
			failures = 0
		} else {
			failures++
		}
		wait := l.Interval
		if b := l.backoff(failures); b > 0 {
			wait = b
		}
		next.Reset(time.Until(at.Add(wait))) // at once if the scrape took longer
	}
}

// backoff returns how long after its start the next scrape waits, after
// failures in a row; 0 means the usual Interval.
func (l *Loop) backoff(failures int) time.Duration {
	if l.MaxBackoff <= 0 || failures <= failuresBeforeBackoff {
		return 0
	}
	wait := l.Interval << min(failures-failuresBeforeBackoff, 20)
	return min(wait, max(l.MaxBackoff, l.Interval))
}
