package policy

import (
	"math/rand/v2"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/cost"
)

// Two gateway instances see the same idle engines but each its own queue
// of assignments. For a prompt no replica holds, each instance's lowest
// estimate is another replica; the cold-prefix rendezvous makes both pick
// the same one, the highest rendezvous weight for the first block among
// the near-best (issue 17).
func TestCostModelColdRendezvous(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 23))
	const n, prompt = 4, 1000
	prefill := cost.Default().Prefill(prompt, 0)
	agree, steered := 0, 0
	const trials = 200
	for k := 0; k < trials; k++ {
		a, b := NewCostModel(rendezvous()), NewCostModel(rendezvous())
		ca, cb := keyed(rng, n), make([]Candidate, n)
		copy(cb, ca)
		// Each instance has assigned a little to a different replica: far
		// less than half a prefill, so every replica is near-best.
		ca[rng.IntN(n)].QueuedPrefill = prefill / 10
		cb[rng.IntN(n)].QueuedPrefill = prefill / 10
		for i := range ca {
			ca[i].QueuedPrefill += time.Duration(i) * time.Millisecond
			cb[i].QueuedPrefill += time.Duration(n-i) * time.Millisecond
		}
		req := &Request{PromptTokens: prompt, Blocks: chain(rng, prompt/16), BlockSize: 16, Now: time.Unix(0, 0)}
		ka := pickKey(t, a, req, ca, rng)
		if a.Last().Steer == SteerCold {
			steered++
		}
		if kb := pickKey(t, b, req, cb, rng); ka == kb {
			agree++
		}
		// The pick is the rendezvous owner of the first block.
		owner := ca[0]
		for _, c := range ca[1:] {
			if hrw(hashKey(req.Blocks[0]), c.Key) > hrw(hashKey(req.Blocks[0]), owner.Key) {
				owner = c
			}
		}
		if ka != owner.Key {
			t.Fatalf("trial %d: picked %#x, the first block's rendezvous owner is %#x", k, ka, owner.Key)
		}
	}
	if agree != trials || steered == 0 {
		t.Fatalf("instances agreed on %d of %d cold prompts, %d steered by the rendezvous", agree, trials, steered)
	}
}

// The rendezvous stays within its band: an owner half a prefill or more
// behind the lowest estimate is passed over, and a prompt any replica
// holds part of goes by the estimate alone.
func TestCostModelColdBand(t *testing.T) {
	rng := rand.New(rand.NewPCG(29, 29))
	const n, prompt = 3, 1000
	prefill := cost.Default().Prefill(prompt, 0)
	for k := 0; k < 100; k++ {
		p := NewCostModel(rendezvous())
		cands := keyed(rng, n)
		req := &Request{PromptTokens: prompt, Blocks: chain(rng, prompt/16), BlockSize: 16, Now: time.Unix(0, 0)}
		owner := rendezvousOwner(req, cands)
		cands[owner].QueuedPrefill = prefill/2 + time.Millisecond
		if i, _ := p.Pick(req, cands, rng); i == owner {
			t.Fatalf("trial %d: the owner %v behind the best was picked", k, cands[owner].QueuedPrefill)
		}
		cands[owner].QueuedPrefill = 0
		warm := (owner + 1) % n
		cands[warm].CachedTokens = 16
		if i, _ := p.Pick(req, cands, rng); i != warm || p.Last().Steer == SteerCold {
			t.Fatalf("trial %d: a prompt replica %d holds a block of went to %d (steer %q)", k, warm, i, p.Last().Steer)
		}
	}
}

// A prompt the gateway routed before and now predicts nowhere was evicted:
// the rendezvous leaves it to the estimate, so that it moves to a replica
// with room instead of back to the owner that evicted it. A new prompt on
// the same engines is still placed on its owner.
func TestCostModelColdEvicted(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 31))
	const n, prompt = 3, 1000
	prefill := cost.Default().Prefill(prompt, 0)
	now := time.Unix(0, 0)
	for k := 0; k < 100; k++ {
		p := NewCostModel(rendezvous())
		cands := keyed(rng, n)
		req := &Request{PromptTokens: prompt, Blocks: chain(rng, prompt/16), BlockSize: 16, Now: now}
		owner := rendezvousOwner(req, cands)
		// The owner is near-best but not best: a new prompt goes there.
		cands[owner].QueuedPrefill = prefill / 10
		if i, _ := p.Pick(req, cands, rng); i != owner || p.Last().Steer != SteerCold {
			t.Fatalf("trial %d: a new prompt went to %d (steer %q), its owner is %d", k, i, p.Last().Steer, owner)
		}
		// A minute later the engines have evicted it and the index says
		// so: it goes by the estimate, to the best.
		req.Now = now.Add(time.Minute)
		if i, _ := p.Pick(req, cands, rng); i == owner || p.Last().Steer == SteerCold {
			t.Fatalf("trial %d: an evicted prompt went back to its owner %d (steer %q)", k, i, p.Last().Steer)
		}
	}
}

// Without routing.cold_rendezvous, the rendezvous is on while a
// candidate's engine is found shared with another router (issue 32): a new
// prompt goes to its owner; with no engine shared it goes by the estimate.
func TestCostModelColdWhenShared(t *testing.T) {
	rng := rand.New(rand.NewPCG(37, 37))
	const n, prompt = 3, 1000
	prefill := cost.Default().Prefill(prompt, 0)
	for k := 0; k < 100; k++ {
		cands := keyed(rng, n)
		req := &Request{PromptTokens: prompt, Blocks: chain(rng, prompt/16), BlockSize: 16, Now: time.Unix(0, 0)}
		owner := rendezvousOwner(req, cands)
		cands[owner].QueuedPrefill = prefill / 10 // near-best, not best
		lone := NewCostModel(DefaultCostModelParams())
		if i, _ := lone.Pick(req, cands, rng); i == owner || lone.Last().Steer == SteerCold {
			t.Fatalf("trial %d: no engine shared, yet the prompt went to its owner (steer %q)", k, lone.Last().Steer)
		}
		cands[(owner+1)%n].Shared = true
		shared := NewCostModel(DefaultCostModelParams())
		if i, _ := shared.Pick(req, cands, rng); i != owner || shared.Last().Steer != SteerCold {
			t.Fatalf("trial %d: an engine shared, the prompt went to %d (steer %q), its owner is %d", k, i, shared.Last().Steer, owner)
		}
	}
}

// rendezvousOwner is the position in cands of the highest rendezvous weight
// for req's first block.
func rendezvousOwner(req *Request, cands []Candidate) int {
	root := hashKey(req.Blocks[0])
	owner := 0
	for i := range cands {
		if hrw(root, cands[i].Key) > hrw(root, cands[owner].Key) {
			owner = i
		}
	}
	return owner
}

func rendezvous() CostModelParams {
	p := DefaultCostModelParams()
	p.ColdRendezvous = true
	return p
}

// The bounded-load guard counts an engine's fresh running and waiting
// requests when they are more than this gateway's own in flight there, as
// with several gateway instances sharing it: a replica busy with another
// instance's requests is set aside; a stale report counts for nothing.
func TestBoundedLoadCountsEngineLoad(t *testing.T) {
	cands := []Candidate{{Replica: 0, InFlight: 1}, {Replica: 1}, {Replica: 2}}
	in := []int{0, 1, 2}
	// Own counts alone: cap ceil(2·2/3) = 2, every replica within it.
	if got, c := BoundedLoad(nil, cands, in, 1); len(got) != 3 || c != 2 {
		t.Fatalf("own counts: kept %v, cap %d", got, c)
	}
	// Replica 1's engine runs 6 for another instance: cap ceil(2·8/3) = 6,
	// and replica 1 at 6 may take no more.
	cands[1].Fresh, cands[1].Running, cands[1].Waiting = true, 4, 2
	if got, c := BoundedLoad(nil, cands, in, 1); len(got) != 2 || got[0] != 0 || got[1] != 2 || c != 6 {
		t.Fatalf("engine load: kept %v, cap %d; want [0 2] and 6", got, c)
	}
	cands[1].Fresh = false
	if got, _ := BoundedLoad(nil, cands, in, 1); len(got) != 3 {
		t.Fatalf("a stale report counted: kept %v", got)
	}
}
