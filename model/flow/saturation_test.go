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

// TestUtilizationCountsSentSinceReport: the requests the gateway sent an
// engine since its report count in its waiting queue, and those finished
// since take waiting ones in, so a report that showed room does not let a
// whole queue through before the next scrape.
func TestUtilizationCountsSentSinceReport(t *testing.T) {
	u := flow.Utilization{QueueDepthThreshold: 5, KVCacheUtilThreshold: 0.8, MetricsStalenessThreshold: 200 * time.Millisecond}
	f := func(want float64, waiting float64, inFlight, atReport int) {
		t.Helper()
		e := flow.Endpoint{Waiting: waiting, HasReport: true, ReportAge: 50 * time.Millisecond, InFlight: inFlight, InFlightAtReport: atReport}
		if got := u.Saturation([]flow.Endpoint{e}); math.Abs(got-want) > 1e-9 {
			t.Errorf("waiting %v, in flight %d (%d at the report): saturation %v, want %v", waiting, inFlight, atReport, got, want)
		}
	}
	f(0.4, 2, 6, 6)  // nothing sent since: the report's 2 of 5
	f(1.2, 2, 10, 6) // 4 sent since: 6 of 5
	f(0.2, 2, 5, 6)  // one finished and let one in
	f(0, 0, 2, 6)    // never below an empty queue
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

// TestRoom: the requests a pool takes before the detector finds it
// saturated, sent to its endpoints in turn.
func TestRoom(t *testing.T) {
	u := flow.Utilization{QueueDepthThreshold: 5, KVCacheUtilThreshold: 0.8, MetricsStalenessThreshold: 200 * time.Millisecond}
	fresh := func(waiting float64) flow.Endpoint {
		return flow.Endpoint{Waiting: waiting, HasReport: true, ReportAge: 50 * time.Millisecond}
	}
	f := func(want int, d flow.Detector, headroom float64, eps ...flow.Endpoint) {
		t.Helper()
		if got := flow.Room(d, eps, headroom, 64); got != want {
			t.Errorf("room of %+v = %d, want %d", eps, got, want)
		}
	}
	f(15, u, 0, fresh(0), fresh(0), fresh(0))                        // 5 each, mean 1 at the 15th
	f(9, u, 0, fresh(3), fresh(3), fresh(0))                         // 15 - 6
	f(0, u, 0, fresh(5))                                             // saturated already
	f(10, u, 1, fresh(0))                                            // headroom 1: saturated at 2
	f(64, flow.Concurrency{MaxConcurrency: 100}, 0, flow.Endpoint{}) // counted up to most
	f(0, u, 0)                                                       // no endpoint
}
