package policy

import (
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/prefix"
)

// fleetSim is a random fleet under cost_model: arrivals and departures,
// conversations that come back, a few hot roots and unique prompts, KV
// usage near kappa.
type fleetSim struct {
	rng      *rand.Rand
	cands    []Candidate
	flights  []int // replica position of each request in flight
	roots    [][]prefix.Hash
	sessions []uint64
	now      time.Time
}

func newFleetSim(seed uint64) *fleetSim {
	rng := rand.New(rand.NewPCG(seed, 99))
	s := &fleetSim{rng: rng, cands: keyed(rng, 1+rng.IntN(12)), now: time.Unix(1e6, 0)}
	for range 3 {
		s.roots = append(s.roots, chain(rng, 16))
	}
	for range 20 {
		s.sessions = append(s.sessions, rng.Uint64()|1)
	}
	return s
}

// step advances the clock and refreshes what the replicas report, then
// returns the next request, or nil for a departure (done by step itself).
func (s *fleetSim) step() *Request {
	rng := s.rng
	s.now = s.now.Add(time.Duration(rng.IntN(20)) * time.Millisecond)
	for i := range s.cands {
		c := &s.cands[i]
		c.QueuedPrefill = time.Duration(rng.IntN(3*(c.InFlight+1))) * 100 * time.Millisecond
		c.Running = rng.IntN(c.InFlight + 1)
		c.KVUsage, c.Fresh = 0.8+0.2*rng.Float64(), rng.IntN(4) != 0
	}
	if len(s.flights) > 0 && rng.IntN(5) < 2 {
		k := rng.IntN(len(s.flights))
		s.cands[s.flights[k]].InFlight--
		s.flights = append(s.flights[:k], s.flights[k+1:]...)
		return nil
	}
	req := &Request{BlockSize: 16, Now: s.now, Key: rng.Uint64()}
	switch rng.IntN(3) {
	case 0: // a unique prompt, maybe too short for a block
		req.Blocks = chain(rng, rng.IntN(40))
	default: // a hot root and a unique tail
		req.Blocks = append(append([]prefix.Hash(nil), s.roots[rng.IntN(len(s.roots))]...), chain(rng, rng.IntN(40))...)
	}
	req.PromptTokens = 16*len(req.Blocks) + rng.IntN(16)
	if rng.IntN(2) == 0 {
		req.SessionKey = s.sessions[rng.IntN(len(s.sessions))]
	}
	for i := range s.cands {
		s.cands[i].CachedTokens = 16 * rng.IntN(len(req.Blocks)+1)
	}
	return req
}

func (s *fleetSim) assign(i int) {
	s.cands[i].InFlight++
	s.flights = append(s.flights, i)
}

func simParams(rng *rand.Rand) CostModelParams {
	p := DefaultCostModelParams()
	p.Epsilon = []float64{0, 0.25, 1, 2}[rng.IntN(4)]
	p.SessionAffinity = true
	p.HotPrefix.Window = time.Second
	p.HotPrefix.Utilization = 0.05 + rng.Float64()/2
	return p
}

// TestBoundedLoad checks over random arrivals and departures, with
// sessions and hot prefixes in play, that some replica is always within
// the cap and cost_model never puts a replica over it.
func TestBoundedLoad(t *testing.T) {
	var sessions, hot, bounded int
	for seed := uint64(0); seed < 60; seed++ {
		s := newFleetSim(seed)
		p := NewCostModel(simParams(s.rng))
		for k := 0; k < 3000; k++ {
			req := s.step()
			if req == nil {
				continue
			}
			total := 0
			within := false
			for _, c := range s.cands {
				total += c.InFlight
			}
			capN := cost.Cap(total, len(s.cands), p.Params().Epsilon)
			for _, c := range s.cands {
				within = within || c.InFlight+1 <= capN
			}
			if !within {
				t.Fatalf("seed %d: no replica within cap %d: %+v", seed, capN, s.cands)
			}
			i, err := p.Pick(req, s.cands, s.rng)
			if err != nil {
				t.Fatal(err)
			}
			if got := s.cands[i].InFlight + 1; got > capN {
				t.Fatalf("seed %d: replica %d gets %d requests, cap %d", seed, i, got, capN)
			}
			s.assign(i)
			d := p.Last()
			if d.Steer == SteerSession {
				sessions++
			}
			if d.Owners > 1 {
				hot++
			}
			if d.BoundedLoad > 0 {
				bounded++
			}
		}
	}
	if sessions == 0 || hot == 0 || bounded == 0 {
		t.Fatalf("not all in play: %d session decisions, %d hot, %d with replicas over the cap", sessions, hot, bounded)
	}
	t.Logf("%d session decisions, %d hot, %d with replicas set aside by bounded load", sessions, hot, bounded)
}

// TestExplainNeverChangesNextChoice runs two copies of each cache-aware
// policy on the same traffic and explains every decision to one of them
// first: Explain names the replica that Pick then picks, and the copies
// never diverge.
func TestExplainNeverChangesNextChoice(t *testing.T) {
	for seed := uint64(0); seed < 20; seed++ {
		s := newFleetSim(seed)
		params := simParams(s.rng)
		pairs := [][2]Explainer{
			{NewCostModel(params), NewCostModel(params)},
			{NewPrefixHash(DefaultPrefixHashParams()), NewPrefixHash(DefaultPrefixHashParams())},
			{NewKVAware(DefaultKVAwareParams()), NewKVAware(DefaultKVAwareParams())},
		}
		// One rng each for the explained copy, the plain copy and the peek
		// at the next draw, all in step.
		rngs := make([][3]*rand.Rand, len(pairs))
		for k := range rngs {
			for j := range 3 {
				rngs[k][j] = rand.New(rand.NewPCG(seed, uint64(k)))
			}
		}
		for step := 0; step < 2000; step++ {
			req := s.step()
			if req == nil {
				continue
			}
			var first int
			for k, pair := range pairs {
				ex, err := pair[0].Explain(req, s.cands, rngs[k][2].Uint64())
				if err != nil {
					t.Fatal(err)
				}
				again, _ := pair[0].Explain(req, s.cands, 0)
				_ = again // a second explanation changes nothing either
				a, _ := pair[0].Pick(req, s.cands, rngs[k][0])
				b, _ := pair[1].Pick(req, s.cands, rngs[k][1])
				if a != ex.Winner || a != b {
					t.Fatalf("seed %d step %d %s: explained %d, picked %d, unexplained copy picked %d",
						seed, step, pair[0].Name(), ex.Winner, a, b)
				}
				if cm, ok := pair[0].(*CostModel); ok {
					if cm.Last() != ex.Decision {
						t.Fatalf("seed %d step %d: Pick decided %+v, Explain %+v", seed, step, cm.Last(), ex.Decision)
					}
					first = a
				}
			}
			s.assign(first)
		}
	}
}

// TestMoreCacheNeverCostsMore checks, through cost_model's explanations
// with hot prefixes and sessions in play, that a candidate's estimate never
// rises when it holds more of the prompt, nor falls when its queue grows.
func TestMoreCacheNeverCostsMore(t *testing.T) {
	s := newFleetSim(7)
	p := NewCostModel(simParams(s.rng))
	for step := 0; step < 5000; step++ {
		req := s.step()
		if req == nil {
			continue
		}
		i := s.rng.IntN(len(s.cands))
		draw := s.rng.Uint64()
		before, _ := p.Explain(req, s.cands, draw)
		c := s.cands[i]
		s.cands[i].CachedTokens += s.rng.IntN(req.PromptTokens + 1)
		more, _ := p.Explain(req, s.cands, draw)
		s.cands[i] = c
		s.cands[i].QueuedPrefill += time.Duration(s.rng.IntN(1000)) * time.Millisecond
		s.cands[i].Running += s.rng.IntN(5)
		busier, _ := p.Explain(req, s.cands, draw)
		s.cands[i] = c
		b := before.Cands[i].Estimate.Total()
		if m := more.Cands[i].Estimate.Total(); m > b {
			t.Fatalf("step %d: more cache costs %v, was %v", step, m, b)
		}
		if m := busier.Cands[i].Estimate.Total(); m < b {
			t.Fatalf("step %d: more queue costs %v, was %v", step, m, b)
		}
		j, _ := p.Pick(req, s.cands, s.rng)
		s.assign(j)
	}
}

func TestCacheAwarePickDoesNotAllocate(t *testing.T) {
	for _, n := range []int{8, 64, 256} {
		for _, p := range benchPolicies() {
			req, cands := benchInputs(n)
			rng := rand.New(rand.NewPCG(1, 1))
			if a := testing.AllocsPerRun(200, func() {
				req.Now = req.Now.Add(time.Millisecond)
				_, _ = p.Pick(req, cands, rng)
			}); a != 0 {
				t.Errorf("%s n=%d: %.1f allocs per Pick", p.Name(), n, a)
			}
		}
	}
}

// TestKthLargest checks the quickselect against a sort, on random weights,
// on few distinct values (ties) and on sorted and reversed input.
func TestKthLargest(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 3))
	for trial := range 2000 {
		n := 1 + rng.IntN(300)
		x := make([]uint64, n)
		for i := range x {
			switch trial % 4 {
			case 0:
				x[i] = rng.Uint64()
			case 1:
				x[i] = uint64(rng.IntN(3)) // ties
			case 2:
				x[i] = uint64(i) // ascending
			default:
				x[i] = uint64(n - i) // descending
			}
		}
		k := 1 + rng.IntN(n)
		want := slices.Clone(x)
		slices.Sort(want)
		if got := kthLargest(x, k); got != want[n-k] {
			t.Fatalf("trial %d: n=%d k=%d: got %d, want %d", trial, n, k, got, want[n-k])
		}
		slices.Sort(x)
		if !slices.Equal(x, want) {
			t.Fatalf("trial %d: kthLargest lost or changed a value", trial)
		}
	}
}

// TestRecomputeWeightNeverAddsWork checks over random fleets that a larger
// recompute weight never picks a replica that computes more of the prompt:
// the price only ever moves a decision toward less prefill.
func TestRecomputeWeightNeverAddsWork(t *testing.T) {
	s := newFleetSim(11)
	params := simParams(s.rng)
	params.SessionAffinity = false // affinity overrides the estimate
	params.HotPrefix.Enabled = false
	moved := 0
	for step := 0; step < 5000; step++ {
		req := s.step()
		if req == nil {
			continue
		}
		draw := s.rng.Uint64()
		var last time.Duration = -1
		var lastWinner int
		for _, w := range []float64{0, 0.5, 2, 8} {
			params.RecomputeWeight = w
			ex, err := NewCostModel(params).Explain(req, s.cands, draw)
			if err != nil {
				t.Fatal(err)
			}
			win := ex.Winner
			if ex.Steer != SteerNone {
				last = -1
				break // the cold rendezvous decided, not the estimate
			}
			f := ex.Cands[win].Estimate.Prefill
			if last >= 0 && f > last {
				t.Fatalf("step %d: weight %v picks replica %d computing %v, a lower weight picked %d computing %v",
					step, w, win, f, lastWinner, last)
			}
			if last >= 0 && f < last {
				moved++
			}
			last, lastWinner = f, win
		}
		j, _ := NewCostModel(params).Pick(req, s.cands, s.rng)
		s.assign(j)
	}
	if moved == 0 {
		t.Fatal("no decision moved with the weight: the test exercises nothing")
	}
}
