package replica

import (
	"math"
	"math/rand/v2"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/model/prefix"
)

// TestCalibration: a replica whose model is auto fits its engine's prefill
// from the first tokens of lone streamed requests whose predictions the
// engine confirms, publishes the
// fit, drops it when calibration is turned off, and warns when its traffic
// never varies.
func TestCalibration(t *testing.T) {
	h := newHarness(t)
	hd := NewHandle("r0", "http://10.0.0.1:8000", []string{"m"}, NewCounters(0, 0))
	var clock atomic.Int64
	clock.Store(time.Date(2026, 12, 7, 0, 0, 0, 0, time.UTC).UnixNano())
	now := func() time.Time { return time.Unix(0, clock.Load()) }
	pid := h.spawn(hd, Config{Health: testHealth(), Now: now})
	var ph prefix.Hasher
	rng := rand.New(rand.NewPCG(1, 2))
	configured := cost.Default()
	truth := configured
	truth.PrefillTokenSecs *= 2
	truth.PrefillPairSecs *= 2
	truth.PrefillFixedSecs *= 2
	// request routes one prompt of u tokens after c cached, alone.
	request := func(u, c int) {
		t.Helper()
		blocks := ph.Chain(nil, prefix.Root("m", "", ""), make([]uint32, 16), 16)
		at := &Attempt{Blocks: blocks, Seq: hd.Shadow().Next(), Tokens: u, Cached: c, BlockSize: 16,
			Prefill: configured.Prefill(u, c)}
		h.send(pid, &Assign{Attempt: at})
		h.sync(t, pid)
		h.send(pid, &FirstByte{Attempt: at}) // a stream's head: not its first token
		clock.Add(int64(truth.Prefill(u, c)))
		at.FirstToken, at.EngineCached = now(), c+1
		h.send(pid, &RequestDone{Outcome: OutcomeOK, Attempt: at})
		h.sync(t, pid)
		clock.Add(int64(time.Second))
	}

	// Off: nothing is published, whatever is measured.
	request(100, 0)
	if f := hd.Shadow().Fit(); f != nil {
		t.Fatalf("fit %+v published without calibration", f)
	}

	hd.Shadow().SetCalibration(&configured)
	for range 2 * cost.OnlineWindow {
		u := int(32 * math.Pow(64, rng.Float64()))
		request(u, 16*rng.IntN(256))
	}
	f := hd.Shadow().Fit()
	if f == nil || !f.Fitted || f.Priced() == nil {
		t.Fatalf("fit %+v, want one in effect", f)
	}
	for _, p := range [][2]float64{{f.Model.PrefillTokenSecs, truth.PrefillTokenSecs}, {f.Model.PrefillFixedSecs, truth.PrefillFixedSecs}} {
		if math.Abs(p[0]-p[1]) > 0.05*p[1] {
			t.Errorf("fit %+v, want a and d within 5%% of %+v", f.Model, truth)
		}
	}
	if f.Configured != configured || f.Model.DecodeInterferenceSecs != configured.DecodeInterferenceSecs {
		t.Errorf("fit %+v: configured or decode interference lost", f)
	}

	// A prediction the engine contradicts is not a sample.
	before := f.Stats.Samples
	blocks := ph.Chain(nil, prefix.Root("m", "", ""), make([]uint32, 16), 16)
	at := &Attempt{Blocks: blocks, Seq: hd.Shadow().Next(), Tokens: 500, Cached: 1024, BlockSize: 16}
	h.send(pid, &Assign{Attempt: at})
	h.sync(t, pid)
	clock.Add(int64(time.Second))
	h.send(pid, &FirstByte{Attempt: at})
	at.FirstToken, at.EngineCached = now(), 1 // the engine had nothing cached
	h.send(pid, &RequestDone{Outcome: OutcomeOK, Attempt: at})
	h.sync(t, pid)
	if got := hd.Shadow().Fit().Stats.Samples; got != before {
		t.Errorf("samples %d after a contradicted prediction, want %d", got, before)
	}

	// A response not streamed (no first token) is not a sample.
	before = hd.Shadow().Fit().Stats.Samples
	at = &Attempt{Blocks: blocks, Seq: hd.Shadow().Next(), Tokens: 500, Cached: 0, BlockSize: 16}
	h.send(pid, &Assign{Attempt: at})
	h.sync(t, pid)
	clock.Add(int64(time.Second))
	h.send(pid, &FirstByte{Attempt: at})
	at.EngineCached = 1
	h.send(pid, &RequestDone{Outcome: OutcomeOK, Attempt: at})
	h.sync(t, pid)
	if got := hd.Shadow().Fit().Stats.Samples; got != before {
		t.Errorf("samples %d after a response not streamed, want %d", got, before)
	}

	// Off again: the configured values price the replica at its next
	// assignment.
	hd.Shadow().SetCalibration(nil)
	request(100, 0)
	if f := hd.Shadow().Fit(); f != nil {
		t.Fatalf("fit %+v still published after calibration was turned off", f)
	}

	// On, with one prompt shape only: never fitted, and the warning says
	// so, once.
	hd.Shadow().SetCalibration(&configured)
	for range calibNoSpread {
		request(300, 512)
	}
	f = hd.Shadow().Fit()
	if f == nil || f.Fitted || f.Priced() != nil {
		t.Fatalf("fit %+v, want the configured values in effect", f)
	}
	if !hd.Snapshot().Warnings.Active(WarnFitNoSpread) {
		t.Errorf("warnings %v, want %s", hd.Snapshot().Warnings.List(), WarnFitNoSpread)
	}
}
