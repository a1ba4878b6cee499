package flow_test

import (
	"math"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/flow"
)

func TestUtilization(t *testing.T) {
	u := flow.Utilization{QueueDepthThreshold: 5, KVCacheUtilThreshold: 0.8, MetricsStalenessThreshold: 200 * time.Millisecond}
	fresh := func(waiting, kv float64) flow.Endpoint {
		return flow.Endpoint{Waiting: waiting, KVUsage: kv, HasReport: true, ReportAge: 50 * time.Millisecond}
	}
	f := func(want float64, eps ...flow.Endpoint) {
		t.Helper()
		if got := u.Saturation(eps); math.Abs(got-want) > 1e-9 {
			t.Errorf("saturation of %+v = %v, want %v", eps, got, want)
		}
	}
	f(0, fresh(0, 0))
	f(1, fresh(5, 0))     // the queue at its threshold
	f(1, fresh(0, 0.8))   // KV at its threshold
	f(0.5, fresh(1, 0.4)) // the larger of 0.2 and 0.5
	f(2, fresh(10, 0.1))
	f(0.5, fresh(0, 0), fresh(5, 0)) // the mean over endpoints
	stale := fresh(0, 0)
	stale.ReportAge = 201 * time.Millisecond
	f(1, stale)                          // stale counts as saturated
	f(1, flow.Endpoint{})                // so does no report
	f(0.5, fresh(0, 0), flow.Endpoint{}) // one of two
	f(1)                                 // no endpoint: saturated
	if flow.Saturated(0.99, 0) || !flow.Saturated(1, 0) || flow.Saturated(1.1, 0.2) || !flow.Saturated(1.2, 0.2) {
		t.Error("Saturated: the threshold is 1 + headroom")
	}
}

func TestConcurrency(t *testing.T) {
	c := flow.Concurrency{MaxConcurrency: 100}
	if got := c.Saturation([]flow.Endpoint{{InFlight: 50}, {InFlight: 150}}); got != 1 {
		t.Errorf("mean of 0.5 and 1.5 = %v", got)
	}
	if got := c.Saturation([]flow.Endpoint{{InFlight: 10}}); got != 0.1 {
		t.Errorf("10 of 100 = %v", got)
	}
}
