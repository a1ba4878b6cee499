package cluster

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/policy"
)

func TestExploreSpeed(t *testing.T) {
	if os.Getenv("EXPLORE") == "" {
		t.Skip()
	}
	eng := defaultEngine()
	eng.Latency.DecodeToken = 100 * time.Microsecond
	cm := policy.DefaultCostModelParams()
	cfg := Config{Replicas: 3, Engine: eng, Policy: "cost_model", CostModel: &cm, Rate: 4, Requests: 4000, Seed: 3,
		Workload: mixW1W6(), AutoCalibrate: true,
		Faults: Faults{SpeedChange: []SpeedChange{{At: 600 * time.Second, Replica: 0, Factor: 2}}}}
	res := mustRun(t, cfg)
	for w := 540; w < 1000; w += 20 {
		n, k, lone := 0, 0, 0
		var maxT time.Duration
		for i := range res.Requests {
			r := &res.Requests[i]
			if r.Arrival < time.Duration(w)*time.Second || r.Arrival >= time.Duration(w+20)*time.Second {
				continue
			}
			n++
			if r.Replica == 0 {
				k++
				maxT = max(maxT, r.TTFT())
			}
		}
		_ = lone
		fmt.Printf("t=%d share0=%.2f (%d/%d) maxTTFT0=%v\n", w, float64(k)/float64(max(n, 1)), k, n, maxT)
	}
	for _, p := range res.Fits[0] {
		if p.At > 560*time.Second && p.At < 1000*time.Second {
			m := p.Model
			fmt.Printf("fit n=%d at %v a %.3g b %.3g d %.3g e %.3g samples %d out %d err %.2f poor %v\n", p.Requests, p.At, m.PrefillTokenSecs, m.PrefillPairSecs, m.PrefillFixedSecs, m.DecodeStepSecs, p.Stats.Samples, p.Stats.Outliers, p.Stats.RelError, p.Stats.Poor)
		}
	}
}
