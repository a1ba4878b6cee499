package load_test

import (
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/load"
)

func TestRestarted(t *testing.T) {
	vllm := load.Report{Engine: load.EngineVLLM, PrefixQueries: 100, PrefixHits: 40, Preemptions: 3,
		Fields: load.FieldPrefix | load.FieldPreemptions}
	sglang := load.Report{Engine: load.EngineSGLang, PrefixQueries: 100, PrefixHits: 40, Fields: load.FieldPrefix}
	edit := func(r load.Report, f func(*load.Report)) load.Report {
		f(&r)
		return r
	}
	f := func(prev, cur load.Report, want bool) {
		t.Helper()
		if got := load.Restarted(prev, cur); got != want {
			t.Errorf("Restarted(%+v, %+v) = %v, want %v", prev, cur, got, want)
		}
	}
	f(vllm, vllm, false)
	f(load.Report{}, vllm, false) // the first report
	f(vllm, edit(vllm, func(r *load.Report) { r.PrefixQueries, r.PrefixHits, r.Preemptions = 101, 41, 4 }), false)
	f(vllm, edit(vllm, func(r *load.Report) { r.PrefixQueries = 99 }), true)
	f(vllm, edit(vllm, func(r *load.Report) { r.PrefixHits = 0 }), true)
	f(vllm, edit(vllm, func(r *load.Report) { r.Preemptions = 2 }), true)
	f(vllm, edit(vllm, func(r *load.Report) { r.PrefixQueries, r.PrefixHits = 0, 0 }), true)
	f(vllm, sglang, true) // another engine behind the URL
	// SGLang's counters vanish from the page when it restarts.
	f(sglang, edit(sglang, func(r *load.Report) { r.PrefixQueries, r.PrefixHits, r.Fields = 0, 0, 0 }), true)
	// ... but a page that never had them says nothing.
	f(edit(sglang, func(r *load.Report) { r.PrefixQueries, r.PrefixHits, r.Fields = 0, 0, 0 }), sglang, false)
	f(edit(sglang, func(r *load.Report) { r.PrefixQueries, r.PrefixHits = 0, 0 }),
		edit(sglang, func(r *load.Report) { r.PrefixQueries, r.PrefixHits, r.Fields = 0, 0, 0 }), false)
	// A counter that grows back past the old value between two scrapes is
	// not seen.
	f(vllm, edit(vllm, func(r *load.Report) { r.PrefixQueries, r.PrefixHits, r.Preemptions = 500, 50, 3 }), false)
}

func TestFresh(t *testing.T) {
	at := time.Unix(1700000000, 0)
	const maxAge = 250 * time.Millisecond
	f := func(at, now time.Time, want bool) {
		t.Helper()
		if got := load.Fresh(at, now, maxAge); got != want {
			t.Errorf("Fresh(%v, %v) = %v, want %v", at, now, got, want)
		}
	}
	f(at, at, true)
	f(at, at.Add(maxAge), true)
	f(at, at.Add(maxAge+time.Nanosecond), false)
	f(at, at.Add(-time.Second), true) // a clock step back does not expire it
	f(time.Time{}, at, false)         // never read
}
