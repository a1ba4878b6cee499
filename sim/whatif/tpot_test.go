package whatif

import (
	"fmt"
	"github.com/inferrail/inferrail/sim/cluster"
	"testing"
	"time"

	"github.com/inferrail/inferrail/sim/engine"
)

// tpotRun is one placement on a simulated engine: running streams already
// decode, then queued prompts and the new one arrive together.
type tpotRun struct {
	running, queued   int // streams decoding, prompts queued ahead of the new one
	queuedTokens, new int // prompt tokens of each queued prompt and of the new one
}

// tpotWindow is the stream's window the running streams' TPOT is taken
// over, and tpotOutput the new request's output tokens.
const (
	tpotWindow = 32
	tpotOutput = 64
)

// measure runs r on the engine cfg and returns the new request's measured
// TPOT (its output time after its first token over its later tokens) and a
// running stream's mean time per token over its next tpotWindow tokens
// after the arrivals.
func (r tpotRun) measure(t *testing.T, cfg engine.Config) (newTPOT, streamTPOT time.Duration) {
	t.Helper()
	e, err := engine.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	next := uint32(1) // distinct token ids: no prompt hits the cache
	req := func(id string, prompt, output int) *engine.Request {
		q := &engine.Request{ID: id, Prompt: make([]uint32, prompt), Output: make([]uint32, output)}
		for i := range q.Prompt {
			q.Prompt[i], next = next, next+1
		}
		if err := e.Add(q); err != nil {
			t.Fatal(err)
		}
		return q
	}
	var now time.Duration
	step := func() engine.StepResult {
		res := e.Step(now)
		now += res.Duration
		return res
	}
	streams := make([]*engine.Request, r.running)
	for i := range streams {
		streams[i] = req(fmt.Sprint("run", i), 64, 400)
	}
	for warm := 0; ; warm++ {
		step()
		decoding := true
		for _, s := range streams {
			decoding = decoding && s.Generated > 1
		}
		if decoding {
			break
		}
		if warm > 1000 {
			t.Fatal("the running streams never all decode")
		}
	}
	for i := range r.queued {
		req(fmt.Sprint("queued", i), r.queuedTokens, 400)
	}
	placed := req("new", r.new, tpotOutput)
	start, tokens := now, 0
	tracked := streams[0]
	for placed.Finished == 0 || tokens < tpotWindow {
		res := step()
		for _, o := range res.Outputs {
			if o.Req == tracked && o.NewTokens > 0 && tokens < tpotWindow {
				if tokens++; tokens == tpotWindow {
					streamTPOT = (res.Start + res.Duration - start) / tpotWindow
				}
			}
		}
		if now-start > time.Hour {
			t.Fatal("the placement never finished")
		}
	}
	return (placed.Finished - placed.FirstToken) / time.Duration(tpotOutput-1), streamTPOT
}

// TestTPOTAgainstEngine compares cost.Model's TPOT estimates, with the
// simulator's default engine's parameters (CostModel), with the TPOT the
// simulated engine gives: the new request's, and a running stream's while
// the queued and new prompts are prefilled in its steps (TPOT and Harm).
// The new request's estimate is exact but for rounding; the running
// stream's counts the queued and new requests as decoding for the whole
// window though they join during it, an overestimate of at most
// (queued + 1) · DecodeSeq per token. Both must be within 1%.
func TestTPOTAgainstEngine(t *testing.T) {
	p, err := Preset("sim")
	if err != nil {
		t.Fatal(err)
	}
	m := cluster.CostModel(p.Config)
	for _, r := range []tpotRun{
		{running: 1, new: 512},
		{running: 8, new: 4000},
		{running: 32, new: 8000},
		{running: 64, new: 512},
		{running: 8, queued: 2, queuedTokens: 2000, new: 2000},
		{running: 32, queued: 4, queuedTokens: 2000, new: 8000},
		{running: 64, queued: 4, queuedTokens: 1000, new: 4000},
		{running: 16, queued: 1, queuedTokens: 12000, new: 256},
	} {
		t.Run(fmt.Sprintf("%d_running_%dx%d_queued_%d_new", r.running, r.queued, r.queuedTokens, r.new), func(t *testing.T) {
			gotNew, gotStream := r.measure(t, p.Config)
			wantNew := m.TPOT(r.running+r.queued, 0, tpotOutput-1)
			queued := time.Duration(r.queued) * m.Prefill(r.queuedTokens, 0)
			wantStream := m.TPOT(r.running-1+r.queued, queued, tpotWindow) + m.Harm(r.new, 0, tpotWindow)/tpotWindow
			if rel := relErr(wantNew, gotNew); rel > 0.01 {
				t.Errorf("new request: estimated TPOT %v, engine %v (%.2f%% off)", wantNew, gotNew, 100*rel)
			}
			if rel := relErr(wantStream, gotStream); rel > 0.01 || wantStream < gotStream {
				t.Errorf("running stream: estimated TPOT %v, engine %v (%.2f%% off; want an overestimate within 1%%)", wantStream, gotStream, 100*rel)
			}
			t.Logf("new: estimate %v engine %v; running stream: estimate %v engine %v", wantNew, gotNew, wantStream, gotStream)
		})
	}
}

func relErr(est, got time.Duration) float64 {
	d := float64(est - got)
	if d < 0 {
		d = -d
	}
	return d / float64(got)
}
