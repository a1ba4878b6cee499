package policy

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/prefix"
)

// chain returns n random chained-looking block hashes.
func chain(rng *rand.Rand, n int) []prefix.Hash {
	b := make([]prefix.Hash, n)
	for i := range b {
		b[i] = prefix.Hash{Hi: rng.Uint64(), Lo: rng.Uint64()}
	}
	return b
}

// keyed returns n idle candidates with distinct stable keys.
func keyed(rng *rand.Rand, n int) []Candidate {
	cands := make([]Candidate, n)
	for i := range cands {
		cands[i] = Candidate{Replica: i, Key: rng.Uint64() | 1}
	}
	return cands
}

func pickKey(t *testing.T, p Policy, req *Request, cands []Candidate, rng *rand.Rand) uint64 {
	t.Helper()
	i, err := p.Pick(req, cands, rng)
	if err != nil {
		t.Fatal(err)
	}
	return cands[i].Key
}

func TestPrefixHashStable(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 10))
	p := NewPrefixHash(PrefixHashParams{Blocks: 4})
	moved := 0
	for iter := 0; iter < 300; iter++ {
		cands := keyed(rng, 2+rng.IntN(30))
		for k := range cands {
			cands[k].InFlight = rng.IntN(50) // whatever the load
		}
		for q := 0; q < 200; q++ {
			blocks := chain(rng, 1+rng.IntN(10))
			req := &Request{Blocks: blocks, PromptTokens: 16 * len(blocks)}
			home := pickKey(t, p, req, cands, rng)

			// The same prefix goes to the same replica, whatever the order
			// of the candidates, their load and the blocks past the first 4.
			shuffled := append([]Candidate(nil), cands...)
			rng.Shuffle(len(shuffled), func(i, j int) { shuffled[i], shuffled[j] = shuffled[j], shuffled[i] })
			for k := range shuffled {
				shuffled[k].InFlight = rng.IntN(50)
			}
			longer := &Request{Blocks: append(blocks[:min(len(blocks), 4):min(len(blocks), 4)], chain(rng, 3)...)}
			if len(blocks) < 4 {
				longer = req
			}
			if got := pickKey(t, p, longer, shuffled, rng); got != home {
				t.Fatalf("prefix moved from %x to %x", home, got)
			}

			// Removing one candidate moves only its own prefixes.
			gone := rng.IntN(len(cands))
			rest := append(append([]Candidate(nil), cands[:gone]...), cands[gone+1:]...)
			got := pickKey(t, p, req, rest, rng)
			switch {
			case home == cands[gone].Key:
				moved++
			case got != home:
				t.Fatalf("removing %x moved a prefix from %x to %x", cands[gone].Key, home, got)
			}
		}
	}
	if moved == 0 {
		t.Fatal("no prefix ever lived on a removed candidate")
	}
}

// TestPrefixHashSpreads checks that prefixes spread evenly over replicas.
func TestPrefixHashSpreads(t *testing.T) {
	rng := rand.New(rand.NewPCG(11, 11))
	p := NewPrefixHash(DefaultPrefixHashParams())
	for _, n := range []int{2, 5, 8, 13} {
		cands := keyed(rng, n)
		counts := make([]int, n)
		for k := 0; k < 2000*n; k++ {
			i, _ := p.Pick(&Request{Blocks: chain(rng, 1)}, cands, rng)
			counts[i]++
		}
		if x := chiSquare(counts); x > chi2Crit999[n-1] {
			t.Errorf("n=%d: chi-square %.1f > %.1f, counts %v", n, x, chi2Crit999[n-1], counts)
		}
	}
}

// TestPrefixHashNoBlock checks the fallback for prompts without a full
// block: the power of two choices, which never picks a unique maximum.
func TestPrefixHashNoBlock(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 12))
	p := NewPrefixHash(DefaultPrefixHashParams())
	for iter := 0; iter < 20000; iter++ {
		cands := randomCands(rng, 20, 1+rng.IntN(5))
		ex, err := p.Explain(&Request{PromptTokens: 7}, cands, rng.Uint64())
		if err != nil || ex.Steer != SteerNoPrefix {
			t.Fatalf("Explain: %+v, %v", ex.Decision, err)
		}
		most, at := -1, 0
		for _, c := range cands {
			switch {
			case c.InFlight > most:
				most, at = c.InFlight, 1
			case c.InFlight == most:
				at++
			}
		}
		if len(cands) > 1 && at == 1 && cands[ex.Winner].InFlight == most {
			t.Fatalf("picked the unique maximum of %+v", cands)
		}
	}
}

func TestKVAware(t *testing.T) {
	rng := rand.New(rand.NewPCG(13, 13))
	p := NewKVAware(DefaultKVAwareParams())
	f := func(prompt int, cands []Candidate, want int) {
		t.Helper()
		for k := 0; k < 20; k++ { // whatever the draw
			if i, _ := p.Pick(&Request{PromptTokens: prompt}, cands, rng); cands[i].Replica != want {
				t.Fatalf("picked replica %d, want %d: %+v", cands[i].Replica, want, cands)
			}
		}
	}
	// 0.8 - 4/8 = 0.3 beats 0 - 0/8 = 0 and 1.0 - 8/8 = 0.
	f(1000, []Candidate{{Replica: 0, CachedTokens: 800, InFlight: 4}, {Replica: 1}, {Replica: 2, CachedTokens: 1000, InFlight: 8}}, 0)
	// Nothing cached, nothing in flight: all score 0; ties to fewer in
	// flight first.
	f(1000, []Candidate{{Replica: 0, InFlight: 0}, {Replica: 1, CachedTokens: 500, InFlight: 5}}, 0)
	// Empty prompt: the load term alone.
	f(0, []Candidate{{Replica: 0, CachedTokens: 10, InFlight: 3}, {Replica: 1, InFlight: 2}}, 1)
	// Equal score, fewer in flight wins: 0.5 - 1/2 = 0 = 0 - 0/2 ... and
	// 1 - 2/2 = 0.
	f(100, []Candidate{{Replica: 0, CachedTokens: 100, InFlight: 2}, {Replica: 1, CachedTokens: 50, InFlight: 1}, {Replica: 2, InFlight: 0}}, 2)

	// Ties on score and load go to chance, evenly.
	cands := []Candidate{{Replica: 0, InFlight: 1}, {Replica: 1, InFlight: 1}, {Replica: 2, InFlight: 1}}
	counts := make([]int, 3)
	for k := 0; k < 6000; k++ {
		i, _ := p.Pick(&Request{PromptTokens: 10}, cands, rng)
		counts[i]++
	}
	if x := chiSquare(counts); x > chi2Crit999[2] {
		t.Fatalf("ties: counts %v", counts)
	}
}

// TestWorkedExample is the design's worked example on the default cost
// model (a = 100µs per token, b = 3.3ns per pair, d = 5ms): a 4,000 token
// prompt, 3,500 of them cached on replica 0 behind 2s of queued prefill,
// none on the idle replica 1.
//
//	replica 0: W 2s   + P(500, 3500) =  61.2ms → 2.061s
//	replica 1: W 0    + P(4000, 0)   = 431.4ms → 0.431s: the cold one wins on the queue
//
// Once replica 1 has 2.2s queued itself it costs 2.631s, and the cached
// replica wins on prefill.
func TestWorkedExample(t *testing.T) {
	p := NewCostModel(DefaultCostModelParams())
	rng := rand.New(rand.NewPCG(14, 14))
	req := &Request{PromptTokens: 4000, BlockSize: 16, Now: time.Unix(1000, 0)}
	cands := []Candidate{
		{Replica: 0, Key: 100, CachedTokens: 3500, QueuedPrefill: 2 * time.Second, InFlight: 3},
		{Replica: 1, Key: 101},
	}
	ex, err := p.Explain(req, cands, rng.Uint64())
	if err != nil {
		t.Fatal(err)
	}
	near := func(got time.Duration, want float64) bool {
		return (got.Seconds()-want) < 0.001 && (want-got.Seconds()) < 0.001
	}
	if !near(ex.Cands[0].Estimate.Total(), 2.0612) || !near(ex.Cands[1].Estimate.Total(), 0.4314) {
		t.Fatalf("estimates %v and %v", ex.Cands[0].Estimate.Total(), ex.Cands[1].Estimate.Total())
	}
	if ex.Winner != 1 || ex.Term != TermQueue {
		t.Fatalf("idle cold replica: winner %d on %q, want 1 on queue", ex.Winner, ex.Term)
	}
	if i, _ := p.Pick(req, cands, rng); i != 1 {
		t.Fatalf("Pick = %d, want the idle cold replica", i)
	}

	cands[1].QueuedPrefill, cands[1].InFlight = 2200*time.Millisecond, 3
	ex, _ = p.Explain(req, cands, rng.Uint64())
	if !near(ex.Cands[1].Estimate.Total(), 2.6314) || ex.Winner != 0 || ex.Term != TermPrefill {
		t.Fatalf("busier cold replica: %v vs %v, winner %d on %q; want 0 on prefill",
			ex.Cands[0].Estimate.Total(), ex.Cands[1].Estimate.Total(), ex.Winner, ex.Term)
	}
	if i, _ := p.Pick(req, cands, rng); i != 0 {
		t.Fatalf("Pick = %d, want the cached replica", i)
	}
}

func TestCostModelGuards(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 15))
	p := NewCostModel(DefaultCostModelParams())
	explain := func(prompt int, cands []Candidate) Explanation {
		t.Helper()
		ex, err := p.Explain(&Request{PromptTokens: prompt, Now: time.Unix(0, 0)}, cands, rng.Uint64())
		if err != nil {
			t.Fatal(err)
		}
		return ex
	}
	// Bounded load: 5 in flight over 3 replicas caps at ceil(2*6/3) = 4,
	// so the cached replica at 5 is set aside.
	ex := explain(4000, []Candidate{{Replica: 0, InFlight: 5, CachedTokens: 3900}, {Replica: 1, QueuedPrefill: time.Second}, {Replica: 2, QueuedPrefill: 2 * time.Second}})
	if ex.Winner != 1 || ex.Cap != 4 || ex.BoundedLoad != 1 || ex.Cands[0].Guard != GuardBoundedLoad {
		t.Fatalf("bounded load: %+v", ex)
	}
	// KV pressure: a long prompt avoids the full replica when a free one
	// holds as much of it (here within short_prompt_tokens), even though
	// the full one is ahead on the estimate...
	full := []Candidate{{Replica: 0, CachedTokens: 3000, KVUsage: 0.95, Fresh: true}, {Replica: 1, CachedTokens: 2800, KVUsage: 0.5, Fresh: true}}
	if ex = explain(4000, full); ex.Winner != 1 || ex.KVPressure != 1 || ex.Cands[0].Guard != GuardKVPressure {
		t.Fatalf("kv pressure: %+v", ex)
	}
	// ...but not when leaving would cost more than short_prompt_tokens of
	// cache: recomputing a cached prefix elsewhere loads the fleet more
	// than the full replica's queue does, and under sustained load that
	// churns every cache (sim/cluster measured W1 p99 going from 0.2 s to
	// minutes with the unconditional guard).
	full[1].CachedTokens = 0
	if ex = explain(4000, full); ex.Winner != 0 || ex.KVPressure != 0 {
		t.Fatalf("kv pressure, cache only on the full replica: %+v", ex)
	}
	full[1].CachedTokens = 2800
	// Nor with little to compute there, nor on a stale report.
	if ex = explain(3200, full); ex.Winner != 0 || ex.KVPressure != 0 {
		t.Fatalf("short compute: %+v", ex)
	}
	full[0].Fresh = false
	if ex = explain(4000, full); ex.Winner != 0 {
		t.Fatalf("stale report: %+v", ex)
	}
	// Every replica under pressure: the guard is waived. (Two replicas
	// with epsilon 1 never trip the bounded-load guard.)
	full[0].Fresh, full[1].KVUsage = true, 0.99
	if ex = explain(4000, full); ex.Winner != 0 || !ex.KVWaived || ex.KVPressure != 0 {
		t.Fatalf("all pressured: %+v", ex)
	}
}

func TestCostModelSessionAffinity(t *testing.T) {
	rng := rand.New(rand.NewPCG(16, 16))
	params := DefaultCostModelParams()
	params.SessionAffinity = true
	p := NewCostModel(params)
	now := time.Unix(0, 0)
	cands := []Candidate{{Replica: 0, Key: 10}, {Replica: 1, Key: 11}, {Replica: 2, Key: 12}}
	req := &Request{PromptTokens: 500, SessionKey: 77, Now: now}
	first := pickKey(t, p, req, cands, rng)
	// The conversation's replica is now the busier one; it still wins...
	for i := range cands {
		if cands[i].Key == first {
			cands[i].QueuedPrefill, cands[i].InFlight = time.Second, 1 // cap ceil(2*2/3) = 2
		}
	}
	if got := pickKey(t, p, req, cands, rng); got != first || p.Last().Steer != SteerSession {
		t.Fatalf("session went to %x (steer %q), want %x", got, p.Last().Steer, first)
	}
	// ...until the bounded-load guard sets it aside.
	for i := range cands {
		if cands[i].Key == first {
			cands[i].InFlight = 4 // cap ceil(2*5/3) = 4
		}
	}
	if got := pickKey(t, p, req, cands, rng); got == first || p.Last().Steer == SteerSession {
		t.Fatalf("session kept its replica past the guard")
	}
	// A caller's own session mark counts too.
	other := &Request{PromptTokens: 500, Now: now}
	marked := []Candidate{{Replica: 0, Key: 10, QueuedPrefill: time.Second, Session: true}, {Replica: 1, Key: 11}}
	if i, _ := p.Pick(other, marked, rng); i != 0 {
		t.Fatal("Candidate.Session ignored")
	}
}

// TestCostModelHotPrefix sends one root prefix at a rate that needs
// several replicas: its owners share it by their queues.
func TestCostModelHotPrefix(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 17))
	params := DefaultCostModelParams()
	params.HotPrefix.Window = time.Second
	// The hot-prefix owners alone: the recompute price would also keep the
	// prefix on the replicas that held it before the owners changed.
	params.RecomputeWeight = 0
	p := NewCostModel(params)
	const n = 8
	cands := keyed(rng, n)
	root := chain(rng, 16)
	now := time.Unix(0, 0)
	holds := make([]bool, n) // which replicas hold the root
	queued := make([]time.Duration, n)
	used := make(map[int]bool)
	steered := 0
	for k := 0; k < 2000; k++ {
		now = now.Add(5 * time.Millisecond)
		for i := range cands {
			queued[i] = max(queued[i]-5*time.Millisecond, 0)
			cands[i].QueuedPrefill = queued[i]
			cands[i].CachedTokens = 0
			if holds[i] {
				cands[i].CachedTokens = 256
			}
		}
		req := &Request{PromptTokens: 300, Blocks: append(root[:16:16], chain(rng, 2)...), BlockSize: 16, Now: now}
		i, _ := p.Pick(req, cands, rng)
		holds[i] = true
		queued[i] += cost.Default().Prefill(300-cands[i].CachedTokens, cands[i].CachedTokens)
		if k > 1000 {
			used[i] = true
		}
		if p.Last().Steer == SteerHotPrefix {
			steered++
		}
	}
	// 200 requests a second of ~10ms prefill each is ~2 replica-seconds
	// per second: 4 owners at utilization 0.5.
	if d := p.Last(); d.Owners < 3 || len(used) < 3 || len(used) > d.Owners {
		t.Fatalf("owners %d, replicas used %d", d.Owners, len(used))
	}
	if steered == 0 {
		t.Fatal("no decision steered by the hot prefix credit")
	}
}
