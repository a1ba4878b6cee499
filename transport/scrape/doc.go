// Package scrape reads the engines' load: GET {base}/metrics on a vLLM or
// SGLang replica, parsed with model/load as the page arrives.
//
// A Scraper owns an HTTP/1.1 client (net/http) with keep-alive connections,
// so that scraping every replica ten times a second reuses one connection
// per replica. It is safe for concurrent use; scrapes share nothing but
// net/http's idle-connection pool, whose lock is never held across I/O, so a
// hung or hostile engine delays no other scrape. Each scrape is bounded by
// its context (load.scrape_timeout) at every stage, connecting, waiting for
// the head and reading the body, and by a page limit (4 MiB): a longer page
// is refused after at most that many bytes, by closing its connection. The
// page is parsed in 32 KiB pieces as it is read, never held whole.
//
// A Loop is one replica's scrape loop. Its owner, the replica actor, runs it
// on a goroutine of its own, stops it by cancelling its context and joins it
// with a WaitGroup; the Loop hands each outcome to a callback, which sends
// it to the actor as a message. The Scraper starts no goroutines itself
// beyond net/http's per-connection ones, which Close ends once the loops
// have stopped.
//
// scrape makes no routing decision: whether a report is fresh enough, and
// what an unreadable page means, is the actor's to decide.
package scrape
