package shadow

import (
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/prefix"
)

var names = []string{"round_robin", "random", "least_request", "p2c", "prefix_hash", "kv_aware", "cost_model"}

// decision returns a random decision over 1 to 8 candidates.
func decision(rng *rand.Rand) *Decision {
	n := 1 + rng.IntN(8)
	blocks := make([]prefix.Hash, rng.IntN(40))
	for i := range blocks {
		blocks[i] = prefix.Hash{Hi: rng.Uint64(), Lo: rng.Uint64()}
	}
	d := &Decision{Policy: "least_request", Routed: rng.IntN(n),
		Request: policy.Request{PromptTokens: 16*len(blocks) + rng.IntN(16), Blocks: blocks, BlockSize: 16,
			Key: rng.Uint64(), Now: time.Unix(1e6, 0)}}
	for i := range n {
		d.Cands = append(d.Cands, policy.Candidate{Replica: i, Key: rng.Uint64() | 1, InFlight: rng.IntN(20),
			CachedTokens: 16 * rng.IntN(len(blocks)+1), QueuedPrefill: time.Duration(rng.IntN(2000)) * time.Millisecond,
			Running: rng.IntN(16), KVUsage: rng.Float64(), Fresh: rng.IntN(2) == 0})
	}
	return d
}

func clone(d *Decision) *Decision {
	c := *d
	c.Cands = slices.Clone(d.Cands)
	c.Request.Blocks = slices.Clone(d.Request.Blocks)
	return &c
}

// Over random decisions and every policy: an outcome agrees exactly when
// the shadow picked the routed replica, prices both picks as Price does,
// leaves the decision as it was, and the tally's counts add up to its
// decisions with the mean gain their average.
func TestCompareAndTally(t *testing.T) {
	m := cost.Default()
	for _, name := range names {
		p, err := policy.New(name)
		if err != nil {
			t.Fatal(err)
		}
		rng, data := rand.New(rand.NewPCG(1, 2)), rand.New(rand.NewPCG(3, 4))
		var tally Tally
		var gains time.Duration
		var agreed, faster, slower int64
		const n = 2000
		for range n {
			d := decision(data)
			before := clone(d)
			o, err := Compare(p, rng, m, d)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if !reflect.DeepEqual(d, before) {
				t.Fatalf("%s: Compare changed the decision", name)
			}
			if o.Agreed != (d.Cands[o.Picked].Replica == d.Cands[d.Routed].Replica) {
				t.Fatalf("%s: agreed %v, picked %d, routed %d", name, o.Agreed, o.Picked, d.Routed)
			}
			if o.Routed != Price(m, &d.Request, &d.Cands[d.Routed]) || o.Shadow != Price(m, &d.Request, &d.Cands[o.Picked]) {
				t.Fatalf("%s: priced %v and %v", name, o.Routed, o.Shadow)
			}
			if o.Agreed && o.Gain() != 0 {
				t.Fatalf("%s: agreed with a gain of %v", name, o.Gain())
			}
			tally.Add(o)
			gains += o.Gain()
			if o.Agreed {
				agreed++
			}
			switch {
			case o.Gain() > 0:
				faster++
			case o.Gain() < 0:
				slower++
			}
		}
		s := tally.Summary(name)
		if s.Decisions != n || tally.Agreed != agreed || tally.Faster != faster || tally.Slower != slower {
			t.Fatalf("%s: tally %+v; counted %d agreed, %d faster, %d slower", name, tally, agreed, faster, slower)
		}
		if tally.Faster+tally.Slower > n-tally.Agreed {
			t.Fatalf("%s: %d faster and %d slower out of %d disagreements", name, tally.Faster, tally.Slower, n-tally.Agreed)
		}
		if s.MeanGain != gains/n || s.Agreement != float64(agreed)/n || s.Faster+s.Slower > 1 {
			t.Fatalf("%s: summary %+v, gains %v", name, s, gains)
		}
		t.Logf("%s against random routing picks: %+v", name, s)
	}
}

// cost_model in shadow, with its guards, hot-prefix credit and recompute
// price out of the way, picks the lowest estimate: never priced slower than the routing pick,
// and faster whenever it disagrees on a replica priced higher.
func TestCostModelShadowNeverSlower(t *testing.T) {
	m := cost.Default()
	params := policy.DefaultCostModelParams()
	params.Model, params.Epsilon, params.Kappa, params.HotPrefix.Enabled = m, 1e9, 1, false
	params.RecomputeWeight = 0
	p := policy.NewCostModel(params)
	rng, data := rand.New(rand.NewPCG(5, 6)), rand.New(rand.NewPCG(7, 8))
	var tally Tally
	for range 2000 {
		d := decision(data)
		o, err := Compare(p, rng, m, d)
		if err != nil {
			t.Fatal(err)
		}
		for i := range d.Cands {
			if pr := Price(m, &d.Request, &d.Cands[i]); pr < o.Shadow {
				t.Fatalf("cost_model picked %d at %v; candidate %d prices %v", o.Picked, o.Shadow, i, pr)
			}
		}
		tally.Add(o)
	}
	if tally.Slower != 0 || tally.Faster == 0 || tally.Routed < tally.Shadow {
		t.Fatalf("tally %+v", tally)
	}
}

// A routing pick out of range, or an empty decision, is not compared.
func TestCompareRejects(t *testing.T) {
	p, _ := policy.New("random")
	rng := rand.New(rand.NewPCG(1, 1))
	for _, d := range []*Decision{{Routed: 0}, {Routed: 2, Cands: make([]policy.Candidate, 2)}, {Routed: -1, Cands: make([]policy.Candidate, 1)}} {
		if _, err := Compare(p, rng, cost.Default(), d); err == nil {
			t.Fatalf("compared %+v", d)
		}
	}
	if s := (Tally{}).Summary("x"); s != (Summary{Policy: "x"}) {
		t.Fatalf("empty summary %+v", s)
	}
}

// BenchmarkCompare is the shadow worker's work per decision and shadow
// policy at 8 replicas: one Pick and two prices.
func BenchmarkCompare(b *testing.B) {
	for _, name := range []string{"least_request", "kv_aware", "cost_model"} {
		b.Run(name, func(b *testing.B) {
			p, _ := policy.New(name)
			rng, data := rand.New(rand.NewPCG(1, 2)), rand.New(rand.NewPCG(3, 4))
			var d *Decision
			for d == nil || len(d.Cands) != 8 {
				d = decision(data)
			}
			m := cost.Default()
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Compare(p, rng, m, d); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
