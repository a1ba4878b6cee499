package flow

import "time"

// Endpoint is what a saturation detector reads of one replica serving the
// model.
type Endpoint struct {
	// Waiting and KVUsage are the engine's own report: requests in its
	// waiting queue, and the fraction of its KV cache in use (0 to 1).
	Waiting, KVUsage float64
	// ReportAge is how old the report is; HasReport is false before the
	// first.
	ReportAge time.Duration
	HasReport bool
	// InFlight is the gateway's own count of the replica's requests in
	// flight; InFlightAtReport was the count when the report was taken.
	InFlight, InFlightAtReport int
}

// waiting is the engine's waiting queue as it must be now: its report's,
// plus the requests the gateway has sent it since the report was taken,
// less those that finished (each of which let a waiting one in), never
// below 0. An engine reports at each scrape (every 100 ms by default):
// read alone, a report that shows room lets every request waiting in the
// gateway through at once, and under overload a stress run (issue 15,
// bench/stress overload) saw engines of 4 sequences queue 33 behind a
// queueDepthThreshold of 5. Counting its own requests since, the gateway
// stops at the threshold; while the engine's batch has room the estimate
// is over, never under, until the next report.
func (e *Endpoint) waiting() float64 {
	return max(0, e.Waiting+float64(e.InFlight-e.InFlightAtReport))
}

// Detector says how saturated a model's pool is: 1 or more is saturated.
type Detector interface {
	Saturation(eps []Endpoint) float64
}

// Names of the detectors, as llm-d's plugin types name them.
const (
	DetectorUtilization = "utilization-detector"
	DetectorConcurrency = "concurrency-detector"
)

// Detectors lists the detector names.
var Detectors = []string{DetectorUtilization, DetectorConcurrency}

// llm-d's defaults for the detectors' parameters
// (shared/reference/llm-d-gie.md §3), which flow_control and an
// EndpointPickerConfig's detector plugins both take.
var (
	DefaultUtilization = Utilization{QueueDepthThreshold: 5, KVCacheUtilThreshold: 0.8, MetricsStalenessThreshold: 200 * time.Millisecond}
	DefaultConcurrency = Concurrency{MaxConcurrency: 100}
)

// Utilization is llm-d's utilization-detector: an endpoint's score is
// max(waiting / QueueDepthThreshold, kv / KVCacheUtilThreshold), waiting
// being the report's brought up to date by the gateway's own counts
// (Endpoint.waiting; llm-d reads the report alone), a report
// older than MetricsStalenessThreshold (or none) scores 1 (fail closed),
// and the pool's saturation is the mean score over its endpoints. No
// endpoint at all is saturated.
type Utilization struct {
	QueueDepthThreshold       int           // llm-d default 5
	KVCacheUtilThreshold      float64       // llm-d default 0.8
	MetricsStalenessThreshold time.Duration // llm-d default 200ms
}

var _ Detector = Utilization{}

// Saturation implements Detector.
func (u Utilization) Saturation(eps []Endpoint) float64 {
	return mean(eps, func(e *Endpoint) float64 {
		if !e.HasReport || e.ReportAge > u.MetricsStalenessThreshold {
			return 1
		}
		return max(e.waiting()/float64(max(u.QueueDepthThreshold, 1)), e.KVUsage/u.KVCacheUtilThreshold)
	})
}

// mean is the mean score over eps; 1 (saturated) for none.
func mean(eps []Endpoint, score func(*Endpoint) float64) float64 {
	if len(eps) == 0 {
		return 1
	}
	sum := 0.0
	for i := range eps {
		sum += score(&eps[i])
	}
	return sum / float64(len(eps))
}

// Concurrency is llm-d's concurrency-detector in its requests mode: an
// endpoint's score is its requests in flight over MaxConcurrency, and the
// pool's saturation the mean. It needs no engine reports.
type Concurrency struct {
	MaxConcurrency int // llm-d default 100
}

var _ Detector = Concurrency{}

// Saturation implements Detector.
func (c Concurrency) Saturation(eps []Endpoint) float64 {
	return mean(eps, func(e *Endpoint) float64 { return float64(e.InFlight) / float64(max(c.MaxConcurrency, 1)) })
}

// Room is how many more requests the pool takes, sent to its endpoints in
// turn, before d finds it saturated at headroom, counting up to most: 0
// when it is saturated already. A caller that reuses a verdict lets that
// many through on it, and no more. It adds to eps' InFlight counts.
func Room(d Detector, eps []Endpoint, headroom float64, most int) int {
	if len(eps) == 0 {
		return 0
	}
	for k := range most {
		if Saturated(d.Saturation(eps), headroom) {
			return k
		}
		eps[k%len(eps)].InFlight++
	}
	return most
}

// Saturated applies headroom to a saturation: a pool is saturated at
// 1 + headroom (llm-d's headroom, default 0).
func Saturated(saturation, headroom float64) bool { return saturation >= 1+headroom }
