// Package scrape reads the engines' load: GET {base}/metrics on a vLLM or
// SGLang replica, parsed with model/load as the page arrives.
//
// A Scraper keeps one transport/upstream.Pool per engine, so that scraping
// every replica ten times a second reuses one keep-alive connection per
// replica, and each scrape's request and page are written and read on the
// scraping goroutine itself, with raw socket calls: no other goroutine or
// thread is woken (net/http's client took two goroutines per connection
// and a hand-off between them per scrape, and at 30 replicas idle that was
// 13% of a core; issue 16). A base URL that a Pool cannot serve (one with
// a path) is scraped with net/http. It is safe for concurrent use; scrapes
// share nothing but the map of pools, whose lock is never held across I/O,
// so a hung or hostile engine delays no other scrape. Each scrape is
// bounded by its context (load.scrape_timeout) at every stage, connecting,
// waiting for the head and reading the body, and by a page limit (4 MiB): a
// longer page is refused after at most that many bytes, by closing its
// connection. The page is parsed in 32 KiB pieces as it is read, never held
// whole. The pool of an engine nobody scraped for a keep-alive timeout (its
// replica left) is closed.
//
// A Loop is one replica's scrape loop. Its owner, the replica actor, runs it
// on a goroutine of its own, stops it by cancelling its context and joins it
// with a WaitGroup; the Loop hands each outcome to a callback, which sends
// it to the actor as a message. The Scraper starts no goroutines itself
// beyond each Pool's reaper (and net/http's per-connection ones for an
// engine with a path), which Close ends once the loops have stopped.
//
// scrape makes no routing decision: whether a report is fresh enough, and
// what an unreadable page means, is the actor's to decide.
package scrape
