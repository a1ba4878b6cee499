package policytest

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/policy"
)

func TestAdmitter(t *testing.T) {
	a := Admitter{TTFT: time.Second}
	cands := []policy.Candidate{{Replica: 0, InFlight: 3}, {Replica: 1, InFlight: 1}}
	rng := rand.New(rand.NewPCG(1, 1))
	f := func(slo policy.SLO, want int, wantErr error) {
		t.Helper()
		k, err := a.Pick(&policy.Request{SLO: slo}, cands, rng)
		if k != want || !errors.Is(err, wantErr) {
			t.Errorf("Pick with %v = %d, %v; want %d, %v", slo, k, err, want, wantErr)
		}
	}
	f(policy.SLO{}, 1, nil)
	f(policy.SLO{TTFT: time.Second}, 1, nil)
	f(policy.SLO{TTFT: time.Second - 1}, -1, policy.ErrNotAdmitted)
	f(policy.SLO{TPOT: time.Nanosecond}, 1, nil)
}
