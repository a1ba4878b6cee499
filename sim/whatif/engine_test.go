package whatif

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/sim/cluster"
	"github.com/inferrail/inferrail/sim/engine"
)

func TestPresets(t *testing.T) {
	for _, p := range Presets() {
		e, err := Preset(p[0])
		if err != nil {
			t.Fatal(err)
		}
		if e.Name != p[0] || e.GPUs < 1 || e.Source == "" {
			t.Fatalf("%s: %+v", p[0], e)
		}
		if _, err := engine.New(e.Config); err != nil {
			t.Fatalf("%s: %v", p[0], err)
		}
	}
	if _, err := Preset("a100"); err == nil || !strings.Contains(err.Error(), "h100-8b") {
		t.Fatalf("unknown preset: %v", err)
	}
	// The KV capacities follow from the arithmetic in their comments.
	kv := func(name string, usableMiB, weightsMiB, bytesPerToken int) {
		t.Helper()
		e, _ := Preset(name)
		tokens := (usableMiB - weightsMiB - h100ActivationMiB) * (1 << 20) / bytesPerToken
		if got := e.Config.NumBlocks; got != tokens/blockSize {
			t.Fatalf("%s: %d blocks, the arithmetic gives %d", name, got, tokens/blockSize)
		}
	}
	kv("h100-8b", h100UsableMiB, 15_316, 32*8*128*2*2)
	kv("4xh100-70b-tp4", h100UsableMiB, 33_665, 80*8*128*2*2/4)
}

func TestWithBlockSize(t *testing.T) {
	e, _ := Preset("h100-8b")
	c, err := e.WithBlockSize(256)
	if err != nil {
		t.Fatal(err)
	}
	if c.Config.BlockSize != 256 || c.Config.NumBlocks != e.Config.NumBlocks*16/256 || !strings.Contains(c.Source, "256") {
		t.Fatalf("%+v", c.Config)
	}
	if _, err := e.WithBlockSize(0); err == nil {
		t.Fatal("block size 0 accepted")
	}
	if _, err := e.WithBlockSize(1 << 30); err == nil {
		t.Fatal("a block larger than the cache accepted")
	}
}

func TestParseFragment(t *testing.T) {
	// What inferrail calibrate writes.
	frag := cost.Fragment(cost.Model{PrefillTokenSecs: 3.25e-5, PrefillPairSecs: 1.06e-9, PrefillFixedSecs: 0.006}, "a comment")
	m, err := ParseFragment(frag)
	if err != nil {
		t.Fatal(err)
	}
	if m.PrefillTokenSecs != 3.25e-5 || m.PrefillPairSecs != 1.06e-9 || m.PrefillFixedSecs != 0.006 {
		t.Fatalf("%+v", m)
	}
	// Under routing: too.
	if _, err := ParseFragment([]byte("routing:\n  cost_model:\n    prefill_token_secs: 0.0001\n    prefill_pair_secs: 0\n    prefill_fixed_secs: 0.005\n")); err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct{ text, want string }{
		{"cost_model:\n  prefill_token_secs: 0.0001\n", "prefill_pair_secs: missing"},
		{"cost_model:\n  prefill_token_secs: -1\n  prefill_pair_secs: 0\n  prefill_fixed_secs: 0\n", "prefill_token_secs: -1"},
		{"routing: {}\n", "no cost_model"},
		{"cost_model: [1, 2]\n", "cost_model fragment"},
		{"\t:", "cost_model fragment"},
	} {
		if _, err := ParseFragment([]byte(bad.text)); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("%q: %v, want %q", bad.text, err, bad.want)
		}
	}
}

func FuzzParseFragment(f *testing.F) {
	f.Add(cost.Fragment(cost.Default()))
	f.Add([]byte("routing:\n  cost_model:\n    prefill_token_secs: .inf\n"))
	f.Add([]byte("cost_model: ~\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := ParseFragment(b)
		if err != nil {
			return
		}
		for _, v := range []float64{m.PrefillTokenSecs, m.PrefillPairSecs, m.PrefillFixedSecs} {
			if !(v >= 0 && v <= 10) {
				t.Fatalf("accepted %v from %q", v, b)
			}
		}
	})
}

func TestWithPrefillAndCostModel(t *testing.T) {
	base, _ := Preset("h100-8b")
	m := cost.Model{PrefillTokenSecs: 5e-5, PrefillPairSecs: 2e-9, PrefillFixedSecs: 0.01}
	e := WithPrefill(base, m, "calibrated", "test")
	l := e.Config.Latency
	if l.PrefillToken != 50*time.Microsecond || l.PrefillPair != 2 || l.PrefillFixed != 10*time.Millisecond {
		t.Fatalf("%+v", l)
	}
	if l.DecodeToken != base.Config.Latency.DecodeToken || e.Config.NumBlocks != base.Config.NumBlocks || e.GPUs != base.GPUs {
		t.Fatal("decode, KV or GPUs not kept from the base")
	}
	cm := cluster.CostModel(e.Config)
	if math.Abs(cm.PrefillTokenSecs-5e-5) > 1e-15 || math.Abs(cm.PrefillPairSecs-2e-9) > 1e-20 ||
		cm.PrefillFixedSecs != 0.01 || cm.DecodeInterferenceSecs != base.Config.Latency.DecodeSeq.Seconds() ||
		cm.DecodeTokenSecs != base.Config.Latency.DecodeToken.Seconds() {
		t.Fatalf("%+v", cm)
	}
}

// FitLog recovers a known prefill from TTFTs that add random queueing to
// most requests: the fastest of each size bucket are near the prefill.
func TestFitLog(t *testing.T) {
	truth := cost.Model{PrefillTokenSecs: 4e-5, PrefillPairSecs: 1.5e-9, PrefillFixedSecs: 0.008}
	rng := rand.New(rand.NewPCG(5, 6))
	var obs []Logged
	for range 4000 {
		u := 64 + rng.IntN(16000)
		c := 0
		if rng.IntN(2) == 0 {
			c = 512 * rng.IntN(20)
		}
		ttft := truth.PrefillSecs(u, c)
		if rng.IntN(4) > 0 { // three in four queued behind others
			ttft += rng.ExpFloat64() * 0.5
		}
		ttft *= 1 + 0.02*rng.Float64() // the network, a little
		obs = append(obs, Logged{Input: u + c, Cached: c, HasCached: true, Measured: true, TTFT: time.Duration(ttft * 1e9)})
	}
	// Requests without a TTFT or cached_tokens are left out.
	obs = append(obs, Logged{Input: 100, Measured: true, TTFT: time.Hour}, Logged{Input: 100, HasCached: true})
	m, rep, err := FitLog(obs, FitOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Requests != 4000 || rep.Kept == 0 || rep.Kept > rep.Requests/5 || rep.Buckets < 10 {
		t.Fatalf("%+v", rep)
	}
	for _, uc := range [][2]int{{1000, 0}, {8000, 0}, {4000, 8192}} {
		got, want := m.PrefillSecs(uc[0], uc[1]), truth.PrefillSecs(uc[0], uc[1])
		if got < want*0.9 || got > want*1.4 {
			t.Errorf("P(%d, %d) = %.4f s, truth %.4f s", uc[0], uc[1], got, want)
		}
	}
	if _, _, err := FitLog(obs[:3], FitOptions{}); err == nil {
		t.Fatal("three requests fitted")
	}
	if _, _, err := FitLog(obs, FitOptions{Quantile: 2}); err == nil {
		t.Fatal("quantile 2 accepted")
	}
}
