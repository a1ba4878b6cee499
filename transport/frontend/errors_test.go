package frontend

import (
	"fmt"
	"strings"
	"testing"

	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/sched"
)

// An admitter's refusal (latency-slo-admitter) is answered 500, as llm-d
// answers it, and counted under its own reason.
func TestRouteErrorNotAdmitted(t *testing.T) {
	err := fmt.Errorf("routing: %w", &sched.AdmitError{Admitter: "latency-slo-admitter"})
	e := RouteError(err, "m")
	if e.Status != 500 || !strings.Contains(e.Message, "cannot be admitted") || !strings.Contains(e.Message, "`m`") {
		t.Fatalf("RouteError = %+v", e)
	}
	if r := RouteReason(err); r != "not_admitted" {
		t.Fatalf("RouteReason = %q", r)
	}
	if r := RouteReason(policy.ErrNoCandidate); r == "not_admitted" {
		t.Fatalf("another error counted as not admitted")
	}
}
