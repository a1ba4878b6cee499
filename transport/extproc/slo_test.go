package extproc

import (
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/actors/fleet"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/flow"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/policy/policytest"
	"github.com/inferrail/inferrail/transport/extproc/envoytest"
)

// sloCount is the picker's count of the model's requests with result.
func (p *picker) sloCount(result string) uint64 {
	for i, res := range flow.SLOResults {
		if res == result {
			return p.srv.met.Model(model).SLOCounts()[i]
		}
	}
	p.t.Fatalf("no result %s", result)
	return 0
}

// The picker reads llm-d's SLO headers and the model's default, answers
// a request no replica can serve within its SLO with llm-d's 500 "cannot
// be admitted" (no dropped reason), a malformed header with a 400, and
// counts what it routed as met or missed.
func TestSLO(t *testing.T) {
	p := startFleet(t, 1, func(c *config.Config) { c.Models[0].SLO = config.SLO{TTFT: time.Minute} },
		func(o *fleet.Options) {
			o.ArmPolicy = func(*config.Config, *config.Model, string) (policy.Policy, error) {
				return policytest.Admitter{TTFT: time.Second}, nil
			}
		})
	with := func(h ...string) envoytest.Request {
		r := post(chat("slo", 2, false), 0)
		for i := 0; i+1 < len(h); i += 2 {
			r.Headers[h[i]] = h[i+1]
		}
		return r
	}
	for _, h := range []string{flow.HeaderSLOTTFT, flow.HeaderSLOTTFTAlias} {
		_, routed := p.route(with(h, "200"))
		refused(t, routed, 500, "")
		if !strings.Contains(string(routed.Immediate.Body), "cannot be admitted") {
			t.Errorf("%s: body %s", h, routed.Immediate.Body)
		}
	}
	if got := p.sloCount(flow.SLONotAdmitted); got != 2 {
		t.Errorf("not_admitted %d, want 2", got)
	}

	_, routed := p.route(with(flow.HeaderSLOTPOT, "soon"))
	refused(t, routed, 400, "")
	if !strings.Contains(string(routed.Immediate.Body), flow.HeaderSLOTPOT) {
		t.Errorf("a malformed header: %s", routed.Immediate.Body)
	}

	// The default minute is admitted and met.
	r := with()
	x, routed := p.route(r)
	if routed.Immediate != nil {
		t.Fatalf("the default objective: %s", routed.Immediate.Body)
	}
	if status, _, out := p.forward(x, r, routed, 0); status != 200 {
		t.Fatalf("%d %s", status, out)
	}
	waitFor(t, "met counted", 2*time.Second, func() bool { return p.sloCount(flow.SLOMet) == 1 })
}
