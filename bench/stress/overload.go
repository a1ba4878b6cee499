package stress

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"sync"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/bench/loadgen"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/flow"
	"github.com/inferrail/inferrail/sim"
)

// The fleet of the overload and fairness scenarios (issue 15): small
// batches and long enough completions that a few dozen requests a second
// fill it, so that three times its capacity is no strain on the machine
// and what the scenarios judge is the gate's, not the CPU's.
const (
	flowBatch  = 4  // the simulators' --max-num-seqs
	flowTokens = 20 // completion tokens of every request
	// flowSLO is the high band's p99 TTFT bound under overload.
	flowSLO = 2 * time.Second
)

// flowService is how long one request takes in a full batch of the
// default latency model: its prefill, then a decode step per token.
func flowService() time.Duration {
	l := sim.DefaultOptions().Engine.Latency
	return l.PrefillFixed + flowTokens*(l.DecodeToken+(flowBatch-1)*l.DecodeSeq)
}

// flowCapacity is the requests a second n engines complete with full
// batches.
func flowCapacity(n int) float64 { return float64(n*flowBatch) / flowService().Seconds() }

// startFlowFleet starts n simulators of flowBatch sequences and a gateway
// with flow control on, mutate applied.
func (t *T) startFlowFleet(n int, mutate func(*config.FlowControl)) ([]*sim.Server, *gateway, error) {
	sims, err := t.startSims(n, func(o *sim.Options) { o.Engine.MaxNumSeqs = flowBatch })
	if err != nil {
		return nil, nil, err
	}
	gw, err := t.startGateway(simURLs(sims), func(c *config.Config) {
		c.FlowControl.Enabled = true
		mutate(&c.FlowControl)
	})
	return sims, gw, err
}

// flowAnswer is one request's outcome under flow control.
type flowAnswer struct {
	status     int
	dropped    string // x-llm-d-request-dropped-reason
	retryAfter string
	sent       time.Time
	ttft       time.Duration // sent to the first content chunk (streams)
	done       time.Time     // the whole answer read
	err        error         // no answer, or a 200 whose body is wrong
}

// served reports whether a is a whole, correct answer.
func (a *flowAnswer) served() bool { return a.err == nil && a.status == 200 }

// refused reports whether a is a refusal flow control names: 429 or 503
// with a dropped reason and Retry-After.
func (a *flowAnswer) refused() bool {
	return a.err == nil && (a.status == 429 || a.status == 503) && a.dropped != "" && a.retryAfter != ""
}

// postFlow sends spec to addr on a connection of its own with the header
// lines extra, and reads the whole answer.
func postFlow(ctx context.Context, addr string, spec loadgen.Spec, extra ...string) (a flowAnswer) {
	a.sent = time.Now()
	defer func() { a.done = time.Now() }()
	c, err := dialRaw(ctx, addr)
	if err != nil {
		a.err = err
		return a
	}
	defer c.Close()
	c.SetDeadline(a.sent.Add(30 * time.Second))
	if _, err := c.Write(postRequest(addr, spec.Path(), bodyFor(spec), extra...)); err != nil {
		a.err = err
		return a
	}
	resp, err := c.readResponse()
	if err != nil {
		a.err = fmt.Errorf("response head: %w", err)
		return a
	}
	defer resp.Body.Close()
	a.status = resp.StatusCode
	a.dropped = resp.Header.Get(flow.HeaderDropped)
	a.retryAfter = resp.Header.Get("Retry-After")
	if a.status != 200 {
		return a
	}
	a.err = loadgen.Check(resp, spec, func() { a.ttft = time.Since(a.sent) })
	return a
}

// waitingMax polls each simulator's own vllm:num_requests_waiting every
// 10 ms until stop is closed, and returns the most any showed, the most
// the fleet held in one round of reads, and the number of reads.
func waitingMax(t *T, sims []*sim.Server, stop <-chan struct{}) func() (float64, float64, int) {
	var wg sync.WaitGroup
	var most, mostPool float64
	reads, fails := 0, 0
	clients := make([]*fasthttp.HostClient, len(sims))
	for i, s := range sims {
		clients[i] = t.client(s.Addr(), 2)
	}
	every(&wg, stop, 10*time.Millisecond, func() {
		pool := 0.0
		defer func() { mostPool = max(mostPool, pool) }()
		for _, c := range clients {
			page, err := getPage(c, "/metrics")
			if err != nil {
				fails++
				continue
			}
			reads++
			if v, ok := loadgen.PromSum(page, "vllm:num_requests_waiting"); ok {
				most = max(most, v)
				pool += v
			}
		}
	})
	return func() (float64, float64, int) {
		wg.Wait()
		t.Checkf(fails == 0, "%d reads of the simulators' /metrics failed", fails)
		return most, mostPool, reads
	}
}

// bandTally counts one band's outcomes.
type bandTally struct {
	sent, served, lost int
	refused            map[string]int // by "status reason"
	ttft               []time.Duration
}

func (b *bandTally) add(a *flowAnswer) {
	b.sent++
	switch {
	case a.served():
		b.served++
		b.ttft = append(b.ttft, a.ttft)
	case a.refused():
		b.refused[strconv.Itoa(a.status)+" "+a.dropped]++
	default:
		b.lost++
	}
}

func (b *bandTally) refusals() int {
	n := 0
	for _, c := range b.refused {
		n += c
	}
	return n
}

// The overload scenario's bands: x-llm-d-inference-objective values and
// the priorities flow_control.objectives maps them to, and the share of
// the load each sends.
var overloadBands = []struct {
	objective string
	priority  int
	share     int // sixths of the load
}{
	{"critical", 10, 1},
	{"standard", 0, 2},
	{"batch", -1, 3}, // sheddable
}

// runOverload: three times the fleet's capacity in three priority bands.
// The high band (half the capacity) must keep its TTFT, the sheddable one
// (half the load) is shed, the middle one waits and is served or refused
// when flow_control.max_wait passes; every request is answered; and the
// gate keeps the engines' own queues near queueDepthThreshold.
func runOverload(t *T) error {
	const replicas = 3
	span := pick(t, 8*time.Second, 4*time.Second)
	capacity := flowCapacity(replicas)
	rate := 3 * capacity
	sims, gw, err := t.startFlowFleet(replicas, func(fc *config.FlowControl) {
		fc.MaxWait = 2 * time.Second
		fc.Objectives = map[string]int{}
		for _, b := range overloadBands {
			fc.Objectives[b.objective] = b.priority
		}
	})
	if err != nil {
		return err
	}
	threshold := config.Default().FlowControl.SaturationDetector.QueueDepthThreshold
	band := make([]int, 6) // request i's band is band[i%6]
	for k, j := 0, 0; k < len(overloadBands); k++ {
		for range overloadBands[k].share {
			band[j] = k
			j++
		}
	}
	stop := make(chan struct{})
	waited := waitingMax(t, sims, stop)
	n := int(rate * span.Seconds())
	answers := make([]flowAnswer, n)
	self0, machine0, t0 := loadgen.SelfCPU(), machineCPU(), time.Now()
	_, err = loadgen.RunOpenLoop(t.ctx, loadgen.Schedule{Rate: rate, N: n}, func(ctx context.Context, i int) error {
		spec := specN("overload", i, flowTokens, true)
		answers[i] = postFlow(ctx, gw.Addr, spec, flow.HeaderObjective+": "+overloadBands[band[i%6]].objective)
		return nil
	})
	busy := ((machineCPU() - machine0) - (loadgen.SelfCPU() - self0)).Seconds() / time.Since(t0).Seconds()
	close(stop)
	most, mostPool, reads := waited()
	if err != nil {
		return err
	}
	tallies := make([]bandTally, len(overloadBands))
	for i := range tallies {
		tallies[i].refused = map[string]int{}
	}
	lost := 0
	for i := range answers {
		b := &tallies[band[i%6]]
		b.add(&answers[i])
		if !answers[i].served() && !answers[i].refused() && lost < 5 {
			t.Logf("lost: band %s: status %d, dropped %q, err %v", overloadBands[band[i%6]].objective,
				answers[i].status, answers[i].dropped, answers[i].err)
			lost++
		}
	}
	t.Figf("fleet of %d engines of %d sequences, %d-token streams (%.0f ms each): capacity %.1f req/s; sent %d at %.1f req/s (3×) for %s",
		replicas, flowBatch, flowTokens, flowService().Seconds()*1e3, capacity, n, rate, span)
	for k, b := range tallies {
		p99 := loadgen.Percentile(b.ttft, 99)
		t.Figf("%s (priority %d, %.1f req/s): %d sent, %d served (TTFT p50 %s, p99 %s), %d refused %v, %d lost",
			overloadBands[k].objective, overloadBands[k].priority, rate*float64(overloadBands[k].share)/6,
			b.sent, b.served, ms(loadgen.Percentile(b.ttft, 50).Seconds()), ms(p99.Seconds()), b.refusals(), b.refused, b.lost)
		t.Checkf(b.lost == 0, "%s: %d requests neither served nor refused with a dropped reason and Retry-After", overloadBands[k].objective, b.lost)
	}
	high, shed := &tallies[0], &tallies[len(tallies)-1]
	t.Checkf(high.served == high.sent, "the high band had %d of %d requests refused", high.sent-high.served, high.sent)
	// The SLO is a time, judged as the latency scenario judges one: only
	// when the rest of the machine left it alone.
	if busy > judgeCores {
		t.Figf("the high band's TTFT SLO not judged: the rest of the machine held %.2f cores", busy)
	} else {
		t.Figf("the rest of the machine held %.2f cores", busy)
		t.Checkf(loadgen.Percentile(high.ttft, 99) <= flowSLO, "the high band's p99 TTFT %s is over its %s SLO",
			ms(loadgen.Percentile(high.ttft, 99).Seconds()), flowSLO)
	}
	// A sheddable request that met a pool not saturated but a queue not
	// empty waits like any other, and may be refused when max_wait passes.
	shedOK := shed.refused["429 "+flow.DroppedSaturated]
	t.Checkf(shedOK+shed.refused["429 "+flow.DroppedTTLExpired] == shed.refusals(), "the sheddable band's refusals %v are not all 429", shed.refused)
	t.Checkf(2*shedOK >= shed.sent, "the sheddable band had only %d of %d shed at once (429 %s)", shedOK, shed.sent, flow.DroppedSaturated)
	bound := float64(threshold + flowBatch)
	t.Figf("engines' own waiting queue (vllm:num_requests_waiting, %d reads every 10 ms): at most %.0f on one engine (bound: queueDepthThreshold %d + batch %d = %.0f), %.0f on the %d together",
		reads, most, threshold, flowBatch, bound, mostPool, replicas)
	t.Checkf(most <= bound, "an engine queued %.0f requests, over queueDepthThreshold + the batch (%.0f)", most, bound)
	return nil
}

// The fairness scenario's flows, by x-llm-d-inference-fairness-id, and
// how far from half its share of the dispatches may be.
const (
	fairLight, fairHeavy = "light", "heavy"
	fairTolerance        = 0.1 // ±10 points of the dispatches
)

// runFairness: two flows in one band, one sending five times as much as
// the other, both more than their half of the fleet can serve. With
// round-robin-fairness-policy each gets half the dispatches while both
// are backlogged (first come first served would give the light one a
// sixth). A request's dispatch is counted by when its answer came: every
// request is the same length, so answers leave in the order requests went
// in, give or take the engines' batches.
func runFairness(t *T) error {
	const replicas = 2
	span := pick(t, 8*time.Second, 4*time.Second)
	capacity := flowCapacity(replicas)
	light := 0.8 * capacity // above its half, so it is backlogged too
	rate := 6 * light
	_, gw, err := t.startFlowFleet(replicas, func(fc *config.FlowControl) {
		fc.Fairness = flow.FairnessRoundRobin
		fc.MaxWait = 3 * time.Second
	})
	if err != nil {
		return err
	}
	n := int(rate * span.Seconds())
	answers := make([]flowAnswer, n)
	flowOf := func(i int) string {
		if i%6 == 0 {
			return fairLight
		}
		return fairHeavy
	}
	res, err := loadgen.RunOpenLoop(t.ctx, loadgen.Schedule{Rate: rate, N: n}, func(ctx context.Context, i int) error {
		answers[i] = postFlow(ctx, gw.Addr, specN("fairness", i, flowTokens, false), flow.HeaderFairnessID+": "+flowOf(i))
		return nil
	})
	if err != nil {
		return err
	}
	// Both flows are backlogged from the first second (the light one gains
	// 0.3 of the capacity a second) until the last request is sent.
	from, to := res.Start.Add(time.Second), res.LastSent
	var dispatched, lost, refused int
	served := map[string]int{}
	waits := map[string][]time.Duration{}
	for i := range answers {
		a := &answers[i]
		switch {
		case a.served():
			if !a.done.Before(from) && !a.done.After(to) {
				served[flowOf(i)]++
				dispatched++
			}
			if !a.sent.Before(from) && !a.sent.After(to) {
				waits[flowOf(i)] = append(waits[flowOf(i)], a.done.Sub(a.sent))
			}
		case a.refused():
			refused++
		default:
			lost++
		}
	}
	share := float64(served[fairLight]) / float64(max(dispatched, 1))
	service := flowService()
	lightWait, heavyWait := loadgen.Percentile(waits[fairLight], 50), loadgen.Percentile(waits[fairHeavy], 50)
	t.Figf("%d engines of %d sequences, %d-token completions (%.0f ms each): capacity %.1f req/s; %q at %.1f req/s and %q at %.1f req/s (5×) for %s, %s",
		replicas, flowBatch, flowTokens, service.Seconds()*1e3, capacity, fairLight, light, fairHeavy, 5*light, span, flow.FairnessRoundRobin)
	t.Figf("answered from 1 s to the last send (%s): %d to %q, %d to %q, a share of %.2f for the light flow (bound 0.50 ± %.2f); their requests sent then took %s and %s p50 (%s unqueued), so both waited; %d refused with a dropped reason, %d lost",
		to.Sub(from).Round(10*time.Millisecond), served[fairLight], fairLight, served[fairHeavy], fairHeavy, share, fairTolerance,
		ms(lightWait.Seconds()), ms(heavyWait.Seconds()), ms(service.Seconds()), refused, lost)
	t.Checkf(lost == 0, "%d requests neither served nor refused with a dropped reason and Retry-After", lost)
	t.Checkf(lightWait > 2*service && heavyWait > 2*service, "a flow was not backlogged: p50 %s and %s against %s unqueued",
		ms(lightWait.Seconds()), ms(heavyWait.Seconds()), ms(service.Seconds()))
	t.Checkf(dispatched > 0 && math.Abs(share-0.5) <= fairTolerance, "the light flow got %.2f of the dispatches while both were backlogged, not 0.50 ± %.2f",
		share, fairTolerance)
	return nil
}
