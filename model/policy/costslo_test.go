package policy

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/cost"
)

// The admission refuses only a request with an SLO, and only when no
// candidate is predicted within it; the pending requests' tokens count
// even where the queued prefill has drained.
func TestAdmits(t *testing.T) {
	m := cost.Default()
	idle := Candidate{Replica: 0}
	// Drained queue, but 60,000 uncached tokens still pending: 6 s of
	// prefill at 100 µs a token.
	stuck := Candidate{Replica: 1, Pending: 30, PendingTokens: 60000}
	req := &Request{PromptTokens: 2000, SLO: SLO{TTFT: 2 * time.Second}}
	if !Admits(req, []Candidate{idle, stuck}, &m, 3) {
		t.Fatal("an idle replica meets 2 s for 2,000 tokens: refused")
	}
	if Admits(req, []Candidate{stuck}, &m, 1) {
		t.Fatal("only a replica 6 s behind: admitted")
	}
	if !Admits(&Request{PromptTokens: 2000}, []Candidate{stuck}, &m, 3) {
		t.Fatal("a request without an SLO was refused")
	}
	// 0.5 s of queued prefill meets 2 s alone, not once tripled.
	half := Candidate{Replica: 2, QueuedPrefill: 600 * time.Millisecond}
	if !Admits(req, []Candidate{half}, &m, 1) || Admits(req, []Candidate{half}, &m, 3) {
		t.Fatal("the wait factor does not scale the wait")
	}
	// A TPOT objective under the decode step of the running requests.
	busy := Candidate{Replica: 3, Running: 200}
	if Admits(&Request{PromptTokens: 10, SLO: SLO{TPOT: 30 * time.Millisecond}}, []Candidate{busy}, &m, 3) {
		t.Fatal("200 running requests meet a 30 ms TPOT: admitted")
	}
}

// Pick refuses with ErrNotAdmitted under SLOAdmission, and routes the same
// request without it.
func TestPickNotAdmitted(t *testing.T) {
	params := DefaultCostModelParams()
	cands := []Candidate{{Replica: 0, Pending: 10, PendingTokens: 80000}, {Replica: 1, Pending: 10, PendingTokens: 90000}}
	req := &Request{PromptTokens: 1000, SLO: SLO{TTFT: time.Second}}
	rng := rand.New(rand.NewPCG(1, 2))
	if _, err := NewCostModel(params).Pick(req, cands, rng); !errors.Is(err, ErrNotAdmitted) {
		t.Fatalf("Pick = %v, want ErrNotAdmitted", err)
	}
	params.SLOAdmission = false
	if i, err := NewCostModel(params).Pick(req, cands, rng); err != nil || i < 0 {
		t.Fatalf("without admission: Pick = %d, %v", i, err)
	}
}

// TestSLOTiers checks over random fleets that when some allowed candidate
// is predicted within the request's SLO, cost_model's estimate picks one
// that is.
func TestSLOTiers(t *testing.T) {
	s := newFleetSim(23)
	params := simParams(s.rng)
	params.SessionAffinity, params.HotPrefix.Enabled, params.SLOAdmission = false, false, false
	p := NewCostModel(params)
	tiered := 0
	for step := 0; step < 5000; step++ {
		req := s.step()
		if req == nil {
			continue
		}
		// A TPOT objective of 20 ms and a few hundred µs: within it for a
		// replica running only a few requests (a 20 ms step and 100 µs
		// more a sequence).
		req.SLO = SLO{TTFT: time.Duration(50+s.rng.IntN(800)) * time.Millisecond,
			TPOT: 20*time.Millisecond + time.Duration(s.rng.IntN(600))*time.Microsecond}
		ex, err := p.Explain(req, s.cands, s.rng.Uint64())
		if err != nil {
			t.Fatal(err)
		}
		some := false
		for _, c := range ex.Cands {
			some = some || c.Guard == GuardNone && !c.MissesSLO
		}
		if ex.Steer == SteerNone && some {
			if ex.Cands[ex.Winner].MissesSLO {
				t.Fatalf("step %d: picked %d, predicted to miss, while another is predicted within", step, ex.Winner)
			}
			lowest := ex.Cands[ex.Winner].Estimate.Total() + ex.Cands[ex.Winner].Recompute
			for _, c := range ex.Cands {
				if c.Guard == GuardNone && c.MissesSLO && c.Estimate.Total()+c.Recompute < lowest {
					tiered++
					break
				}
			}
		}
		j, _ := p.Pick(req, s.cands, s.rng)
		s.assign(j)
	}
	if tiered == 0 {
		t.Fatal("no decision where the SLO moved the pick: the test exercises nothing")
	}
}
