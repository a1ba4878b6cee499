package engine

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/kvevent"
)

// workload is a random set of requests whose prompts share prefixes.
func workload(rng *rand.Rand, n, maxModelLen int) []*Request {
	bases := make([][]uint32, 1+rng.IntN(4))
	for i := range bases {
		bases[i] = tokens(10_000*(i+1), rng.IntN(maxModelLen*3/4))
	}
	reqs := make([]*Request, n)
	at := time.Duration(0)
	for i := range reqs {
		base := bases[rng.IntN(len(bases))]
		p := slices.Clone(base[:rng.IntN(len(base)+1)])
		p = append(p, tokens(1_000_000+rng.IntN(1000)*100, rng.IntN(40))...)
		if len(p) == 0 {
			p = tokens(5, 1)
		}
		p = p[:min(len(p), maxModelLen-1)]
		out := rng.IntN(min(60, maxModelLen-len(p)+1))
		if rng.IntN(3) == 0 {
			at += time.Duration(rng.IntN(200)) * time.Millisecond
		}
		reqs[i] = &Request{
			ID:      fmt.Sprint("r", i),
			Root:    testRoot,
			Prompt:  p,
			Output:  tokens(2_000_000+i*1000, out),
			Reason:  []string{"stop", "length"}[rng.IntN(2)],
			Arrival: at,
		}
	}
	return reqs
}

type runStats struct {
	steps, preemptions, aborts int
	stored, removed, cleared   int // events by kind
	dupSteps                   int // steps after which a hash was on two blocks
}

// runWorkload drives e through reqs in virtual time, checking the engine's
// invariants and the event mirror after every step, and the requests' outputs
// at the end. abortP is the chance per step of aborting a random live request;
// resetP the chance of resetting the prefix cache whenever the engine is idle.
func runWorkload(t *testing.T, e *Engine, reqs []*Request, rng *rand.Rand, abortP, resetP float64) runStats {
	t.Helper()
	var st runStats
	m := mirror{}
	seqs := map[*Request]*seq{}
	tokensOut := map[*Request]int{}
	done := map[*Request]string{}
	var live []*Request
	next := 0
	now := time.Duration(0)
	for next < len(reqs) || !e.Idle() {
		if e.Idle() {
			if rng.Float64() < resetP && !e.ResetPrefixCache() {
				t.Fatal("reset refused on an idle engine")
			}
			if e.Idle() {
				now = max(now, reqs[next].Arrival)
			}
		}
		for ; next < len(reqs) && reqs[next].Arrival <= now; next++ {
			r := reqs[next]
			if err := e.Add(r); err != nil {
				t.Fatal(err)
			}
			seqs[r] = e.live[r.ID]
			live = append(live, r)
		}
		if len(live) > 0 && rng.Float64() < abortP {
			i := rng.IntN(len(live))
			if !e.Abort(live[i].ID) {
				t.Fatalf("abort of live %s refused", live[i].ID)
			}
			live = slices.Delete(live, i, i+1)
			st.aborts++
		}
		res := e.Step(now)
		st.steps++
		if st.steps > 200_000 {
			t.Fatal("workload does not drain")
		}
		if res.ScheduledTokens > e.cfg.MaxBatchedTokens {
			t.Fatalf("step scheduled %d tokens > budget %d", res.ScheduledTokens, e.cfg.MaxBatchedTokens)
		}
		if res.Start != now || res.Duration < 0 {
			t.Fatalf("step start %v duration %v at %v", res.Start, res.Duration, now)
		}
		st.preemptions += res.Preempted
		checkEngine(t, e)
		m.apply(t, res.Events)
		checkMirror(t, m, e)
		for _, ev := range res.Events {
			switch ev.(type) {
			case *kvevent.BlockStored:
				st.stored++
			case *kvevent.BlockRemoved:
				st.removed++
			case *kvevent.AllBlocksCleared:
				st.cleared++
			}
		}
		if len(e.pool.dups) > 0 {
			st.dupSteps++
		}
		now += res.Duration
		for _, o := range res.Outputs {
			r := o.Req
			if _, ok := done[r]; ok {
				t.Fatalf("%s reported after it was done", r.ID)
			}
			tokensOut[r] += o.NewTokens
			if o.NewTokens > 0 && r.FirstToken > now {
				t.Fatalf("%s: first token at %v, after this step's end %v", r.ID, r.FirstToken, now)
			}
			if o.Done {
				done[r] = o.Reason
				if i := slices.Index(live, r); i >= 0 {
					live = slices.Delete(live, i, i+1)
				}
			}
		}
	}

	for _, r := range reqs {
		why, ok := done[r]
		switch {
		case !ok:
			t.Fatalf("%s never finished", r.ID)
		case why == "abort":
			if tokensOut[r] > len(r.Output) {
				t.Fatalf("aborted %s produced %d > %d tokens", r.ID, tokensOut[r], len(r.Output))
			}
		case why != r.Reason || tokensOut[r] != len(r.Output) || r.Generated != len(r.Output):
			t.Fatalf("%s finished %q with %d tokens (generated %d), want %q and %d",
				r.ID, why, tokensOut[r], r.Generated, r.Reason, len(r.Output))
		case len(r.Output) > 0 && (r.Finished < r.FirstToken || r.FirstToken < r.Scheduled) ||
			r.Finished < r.Scheduled || r.Scheduled < r.Arrival:
			t.Fatalf("%s timeline: arrival %v scheduled %v first %v finished %v",
				r.ID, r.Arrival, r.Scheduled, r.FirstToken, r.Finished)
		}
	}
	// FCFS: first admissions follow arrival (Add) order.
	last := -1
	for _, r := range reqs {
		if s := seqs[r]; s.admitted {
			if s.order <= last {
				t.Fatalf("%s admitted %dth, after a later arrival", r.ID, s.order)
			}
			last = s.order
		}
	}
	stats := e.Stats()
	var fin int64
	for _, n := range stats.FinishedByReason {
		fin += n
	}
	if fin != int64(len(reqs)) || stats.FinishedByReason["abort"] != int64(st.aborts) {
		t.Fatalf("finished %v for %d requests, %d aborts", stats.FinishedByReason, len(reqs), st.aborts)
	}
	if stats.KVUsage != 0 || stats.UsedBlocks != 0 || stats.Running != 0 || stats.Waiting != 0 {
		t.Fatalf("drained engine: %+v", stats)
	}
	if int(stats.Preemptions) != st.preemptions {
		t.Fatalf("preemptions %d, steps reported %d", stats.Preemptions, st.preemptions)
	}
	for id, b := range e.pool.blocks[:e.pool.numBlocks()] {
		if b.ref != 0 {
			t.Fatalf("block %d still has ref %d", id, b.ref)
		}
	}
	return st
}

// TestRandomSchedules runs random workloads with shared prefixes, tiny pools
// and random aborts.
func TestRandomSchedules(t *testing.T) {
	var total runStats
	for seed := range uint64(60) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 99))
			bs := []int{1, 2, 4, 16}[rng.IntN(4)]
			maxLen := 64 + rng.IntN(256)
			seqs := 1 + rng.IntN(8)
			cfg := Config{
				BlockSize:        bs,
				NumBlocks:        (maxLen+bs-1)/bs + rng.IntN(3*maxLen/bs),
				MaxNumSeqs:       seqs,
				MaxBatchedTokens: seqs + rng.IntN(300),
				MaxModelLen:      maxLen,
				PrefixCaching:    rng.IntN(5) > 0,
				Latency:          defaultLatency,
			}
			if rng.IntN(4) == 0 {
				cfg.Latency.Zero = true
			}
			e := mustNew(t, cfg)
			st := runWorkload(t, e, workload(rng, 20+rng.IntN(60), maxLen), rng, 0.02, 0.3)
			total.preemptions += st.preemptions
			total.aborts += st.aborts
			total.stored += st.stored
			total.removed += st.removed
			total.cleared += st.cleared
			total.dupSteps += st.dupSteps
		})
	}
	t.Logf("totals %+v", total)
	if total.preemptions == 0 || total.aborts == 0 || total.stored == 0 || total.removed == 0 ||
		total.cleared == 0 || total.dupSteps == 0 {
		t.Fatalf("the random workloads missed a case: %+v", total)
	}
}

// TestDryPoolFinishesEverything: a pool that holds exactly one request of
// max_model_len preempts over and over but finishes every request.
func TestDryPoolFinishesEverything(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	cfg := Config{
		BlockSize: 4, NumBlocks: 32, MaxNumSeqs: 8, MaxBatchedTokens: 64, MaxModelLen: 128,
		PrefixCaching: true, Latency: defaultLatency,
	}
	e := mustNew(t, cfg)
	reqs := make([]*Request, 30)
	for i := range reqs {
		reqs[i] = request(fmt.Sprint(i), tokens(i*1000, 30+rng.IntN(40)), 20+rng.IntN(30))
	}
	st := runWorkload(t, e, reqs, rng, 0, 0)
	if st.preemptions < 10 {
		t.Fatalf("only %d preemptions", st.preemptions)
	}
	resumed := 0
	for _, r := range reqs {
		if r.Preemptions > 0 {
			resumed++
		}
	}
	if resumed == 0 {
		t.Fatal("no request records a preemption")
	}
}

// TestPreemptionOrder: the running request that cannot grow preempts the most
// recently admitted one, which goes back to the front of the queue, and no
// waiting request is admitted in that step.
func TestPreemptionOrder(t *testing.T) {
	cfg := Config{
		BlockSize: 4, NumBlocks: 8, MaxNumSeqs: 4, MaxBatchedTokens: 64, MaxModelLen: 32,
		PrefixCaching: true, Latency: defaultLatency,
	}
	e := mustNew(t, cfg)
	a, b, c := request("a", tokens(0, 8), 8), request("b", tokens(100, 8), 8), request("c", tokens(200, 8), 8)
	for _, r := range []*Request{a, b, c} {
		if err := e.Add(r); err != nil {
			t.Fatal(err)
		}
	}
	// Three 8-token prompts take 6 of the 8 blocks and each samples a token.
	res := e.Step(0)
	if e.Stats().Running != 3 || res.ScheduledTokens != 24 {
		t.Fatalf("stats %+v", e.Stats())
	}
	// Each decodes into a third block: a and b get the last two, c has none.
	// c is the last running request and preempts itself.
	res = e.Step(time.Second)
	if res.Preempted != 1 || c.Preemptions != 1 || e.running[0].r != a || e.running[1].r != b {
		t.Fatalf("preempted %d, running %v", res.Preempted, e.running)
	}
	if e.waiting.at(0).r != c {
		t.Fatal("preempted c not at the front of the queue")
	}
	drain(t, e, 2*time.Second, nil)
	if c.Generated != 8 || c.CachedTokens != 0 || e.Stats().PrefixQueries != 24 {
		t.Fatalf("c %+v, stats %+v", c, e.Stats())
	}
}

// meanTTFT runs n requests arriving every gap and returns their mean TTFT.
func meanTTFT(t *testing.T, gap time.Duration, n int) time.Duration {
	cfg := testConfig()
	cfg.PrefixCaching = false
	e := mustNew(t, cfg)
	reqs := make([]*Request, n)
	for i := range reqs {
		reqs[i] = request(fmt.Sprint(i), tokens(i*10_000, 1000), 32)
		reqs[i].Arrival = time.Duration(i) * gap
	}
	now, next := time.Duration(0), 0
	for next < n || !e.Idle() {
		if e.Idle() {
			now = max(now, reqs[next].Arrival)
		}
		for ; next < n && reqs[next].Arrival <= now; next++ {
			if err := e.Add(reqs[next]); err != nil {
				t.Fatal(err)
			}
		}
		now += e.Step(now).Duration
	}
	var sum time.Duration
	for _, r := range reqs {
		sum += r.FirstToken - r.Arrival
	}
	return sum / time.Duration(n)
}

// TestTTFTBendsAtCapacity sweeps offered load: mean TTFT does not fall as
// the rate rises, stays near Prefill(u,0) well below capacity and grows
// sharply past it.
func TestTTFTBendsAtCapacity(t *testing.T) {
	rates := []float64{0.5, 1, 2, 4, 6, 8, 10, 12, 16, 24, 32}
	var ttft []time.Duration
	for _, rate := range rates {
		ttft = append(ttft, meanTTFT(t, time.Duration(float64(time.Second)/rate), 300))
	}
	t.Logf("rates %v: mean TTFT %v", rates, ttft)
	for i := 1; i < len(ttft); i++ {
		if ttft[i] < ttft[i-1] {
			t.Errorf("mean TTFT fell from %v at %v/s to %v at %v/s", ttft[i-1], rates[i-1], ttft[i], rates[i])
		}
	}
	p := defaultLatency.Prefill(1000, 0)
	if ttft[0] != p {
		t.Errorf("TTFT at %v/s = %v, want the idle Prefill %v", rates[0], ttft[0], p)
	}
	if last := ttft[len(ttft)-1]; last < 20*p {
		t.Errorf("TTFT past capacity %v, want > 20 × %v", last, p)
	}
}
