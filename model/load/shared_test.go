package load

import "testing"

// A lone gateway (the engine never holds more than it was sent, and admits
// nothing while the gateway sends it nothing) is never judged shared; an
// engine that shows another router's requests in a few scrapes of a window
// is, by either sign, and a whole window without them ends it.
func TestShared(t *testing.T) {
	var s Shared
	for i := range 10 * SharedWindow {
		// The engine runs what the gateway sent, or less (a request not
		// arrived yet, or finished but not yet relayed); it admits
		// tokens only while the gateway has sent it something.
		o := SharedScrape{Engine: float64(i % 4), Ours: i%4 + i%2, Steady: true, Queries: float64(100 * (i % 3)), Idle: i%3 == 0}
		if s.Observe(o) || s.Active() {
			t.Fatalf("scrape %d (%+v): judged shared", i, o)
		}
	}
	// More running than sent, in SharedRaise scrapes of a window.
	changes := 0
	for i := range SharedWindow {
		extra := 0.0
		if i%(SharedWindow/SharedRaise) == 0 {
			extra = 1
		}
		if s.Observe(SharedScrape{Engine: 2 + extra, Ours: 2, Steady: true}) {
			changes++
		}
	}
	if !s.Active() || changes != 1 {
		t.Fatalf("active %v after %d changes; want shared once", s.Active(), changes)
	}
	if excess, of := s.Seen(); excess < SharedRaise || of == 0 || excess > of {
		t.Fatalf("seen %d of %d", excess, of)
	}
	// SharedQuiet whole windows without: ended.
	for range (SharedQuiet + 1) * SharedWindow {
		if s.Observe(SharedScrape{Engine: 1, Ours: 1, Steady: true}) {
			changes++
		}
	}
	if s.Active() || changes != 2 {
		t.Fatalf("active %v after %d changes; want ended", s.Active(), changes)
	}
	// More running than the gateway had while a request of its started
	// during the read: no sign (it may have come and gone unseen).
	for range (SharedQuiet + 1) * SharedWindow {
		if s.Observe(SharedScrape{Engine: 3, Ours: 1}) {
			t.Fatal("a read during which requests started made a verdict")
		}
	}
	// Tokens admitted while the gateway had nothing there.
	for i := range SharedWindow {
		s.Observe(SharedScrape{Queries: float64(1500 * (i % 20 / 19)), Idle: true})
	}
	if !s.Active() {
		t.Fatal("queries admitted while the gateway was idle there: not judged shared")
	}
}
