package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"slices"
	"strconv"
	"time"

	"github.com/inferrail/inferrail/bench/loadgen"
)

// runResult is one measured run: one target, one request kind, one round.
type runResult struct {
	Round   int    `json:"round"`   // from 1
	Attempt int    `json:"attempt"` // from 1; more when the round was run again
	Target  string `json:"target"`
	Mode    string `json:"mode"`

	Requests     int            `json:"requests"`
	OK           int            `json:"ok"`
	Errors       int            `json:"errors"`
	ErrorKinds   map[string]int `json:"error_kinds,omitempty"`
	Warmup       int            `json:"warmup_requests"`
	WarmupErrors int            `json:"warmup_errors"`

	// RateAchieved is the send rate the schedule really kept.
	RateAchieved float64 `json:"rate_achieved"`
	// Latency is from each request's due time to the end of its response.
	Latency   loadgen.Summary `json:"latency"`
	LatencyP9 float64         `json:"latency_p999_s"`
	// Lag is how late each request left the load generator.
	Lag loadgen.Summary `json:"send_lag"`

	WallS float64 `json:"wall_s"`
	// CPU over the measured run, from /proc (10 ms ticks).
	ProxyCPUS     float64 `json:"proxy_cpu_s"` // nginx's or the gateway's; 0 for direct
	ProxyCores    float64 `json:"proxy_cores"`
	ProxyUsPerReq float64 `json:"proxy_cpu_us_per_request"`
	// ProxySwitchesPerReq is how often the proxy's threads were switched
	// out (they slept, or were preempted) per measured request: each is a
	// wake-up, and on this VM much of a proxy's CPU.
	ProxySwitchesPerReq float64 `json:"proxy_context_switches_per_request"`
	// ProxySysUsPerReq is the part of ProxyUsPerReq the kernel spent on
	// the proxy's behalf (stime): its socket reads and writes, the
	// wake-ups of the processes it writes to, its context switches.
	ProxySysUsPerReq float64 `json:"proxy_sys_cpu_us_per_request"`
	// ProxyInvoluntaryPerReq is the part of ProxySwitchesPerReq where the
	// kernel preempted a proxy thread that could still run.
	ProxyInvoluntaryPerReq float64 `json:"proxy_involuntary_switches_per_request"`
	SimsCPUS               float64 `json:"sims_cpu_s"`
	LoadgenCPUS            float64 `json:"loadgen_cpu_s"`
	// OtherCores is every other process's CPU over the run, from
	// /proc/stat: the idle proxies, and whatever else shares the machine.
	OtherCores float64 `json:"other_processes_cores"`
	// Replicas counts x-inferrail-replica over the gateway's answers.
	Replicas map[string]int `json:"replicas,omitempty"`
	// Discarded marks a run of a round that was run again because other
	// processes used more than --max-other-cores during one of its runs.
	Discarded bool `json:"discarded,omitempty"`
}

// answer is what one request brought back, kept to be checked after the
// run so that checking costs the run nothing.
type answer struct {
	status  int
	header  http.Header
	body    []byte
	replica string
}

// measureRound measures every target of order with one kind of request.
// Each target first gets its warm-up; then the measured requests go out in
// blocks of c.block, each an open-loop run of its own, and the targets take
// turns block by block (the turn order rotating too), so that a burst of
// noise on the machine lands on all of them rather than on whichever target
// happened to run then. A target's figures are over all its blocks.
func measureRound(ctx context.Context, c *config, s *setup, order []target, mode string, round, attempt int) ([]*runResult, error) {
	type tally struct {
		lat, lag          []time.Duration
		errs              int
		kinds, replicas   map[string]int
		span              time.Duration // from each block's start to its last send, summed
		sent              int           // requests in the blocks' spans
		wall              time.Duration
		proxy, sims, self time.Duration
		proxySys          time.Duration // the part of proxy in the kernel
		other             time.Duration
		switches          loadgen.Switches // the proxy's context switches
	}
	results := make([]*runResult, len(order))
	tallies := make([]tally, len(order))
	clients := make([]*http.Client, len(order))
	for k, t := range order {
		results[k] = &runResult{Round: round, Attempt: attempt, Target: t.Name, Mode: mode, Requests: c.requests, Warmup: c.warmup}
		tallies[k] = tally{kinds: map[string]int{}}
		// A fresh client per target and round, so that no round inherits
		// another's connections; the warm-up opens them.
		tr := &http.Transport{
			DialContext:         (&net.Dialer{Timeout: 5 * time.Second}).DialContext,
			MaxIdleConns:        4096,
			MaxIdleConnsPerHost: 1024,
			IdleConnTimeout:     20 * time.Second, // under every server's idle timeout
			DisableCompression:  true,
		}
		defer tr.CloseIdleConnections()
		clients[k] = &http.Client{Transport: tr, Timeout: 10 * time.Second}
	}
	spec := func(t target, tag string, i int) loadgen.Spec {
		return loadgen.Spec{Stream: mode == "stream", MaxTokens: 1,
			Prompt: fmt.Sprintf("%s %s r%d.%d %d: tell me about the weather", t.Name, tag, round, attempt, i)}
	}
	for k, t := range order {
		if c.warmup == 0 {
			break
		}
		runtime.GC() // garbage collection is off otherwise (main)
		w, err := openLoop(ctx, clients[k], t, c, c.warmup, func(i int) loadgen.Spec { return spec(t, "warmup", i) })
		if err != nil {
			return nil, fmt.Errorf("%s %s warm-up: %w", t.Name, mode, err)
		}
		results[k].WarmupErrors = w.Errors()
	}

	turns := make([]int, len(order))
	for k := range turns {
		turns[k] = k
	}
	for b, first := 0, 0; first < c.requests; b, first = b+1, first+c.block {
		n := min(c.block, c.requests-first)
		for _, k := range rotation(turns, b) {
			t, tl := order[k], &tallies[k]
			runtime.GC()
			before, err := sampleCPU(s, t)
			if err != nil {
				return nil, err
			}
			r, err := openLoop(ctx, clients[k], t, c, n, func(i int) loadgen.Spec { return spec(t, "run", first+i) })
			if err != nil {
				return nil, fmt.Errorf("%s %s: %w", t.Name, mode, err)
			}
			after, err := sampleCPU(s, t)
			if err != nil {
				return nil, err
			}
			tl.lat = append(tl.lat, r.OK()...)
			tl.lag = append(tl.lag, r.Lag...)
			tl.errs += r.Errors()
			for msg, cnt := range r.ErrorKinds() {
				if _, seen := tl.kinds[msg]; seen || len(tl.kinds) < 10 {
					tl.kinds[msg] += cnt
				}
			}
			for id, cnt := range r.replicas {
				if tl.replicas == nil {
					tl.replicas = map[string]int{}
				}
				tl.replicas[id] += cnt
			}
			tl.span += r.LastSent.Sub(r.Start)
			tl.sent += n - 1
			tl.wall += after.at.Sub(before.at)
			tl.proxy += after.proxy - before.proxy
			tl.proxySys += after.proxySys - before.proxySys
			tl.switches = tl.switches.Add(after.switches.Sub(before.switches))
			tl.sims += after.sims - before.sims
			tl.self += after.self - before.self
			tl.other += (after.machine - before.machine) - (after.proxy - before.proxy) - (after.sims - before.sims) - (after.self - before.self)
		}
	}

	for k, res := range results {
		tl := &tallies[k]
		res.OK, res.Errors = len(tl.lat), tl.errs
		if len(tl.kinds) > 0 {
			res.ErrorKinds = tl.kinds
		}
		res.Replicas = tl.replicas
		if tl.span > 0 {
			res.RateAchieved = float64(tl.sent) / tl.span.Seconds()
		}
		res.Latency = loadgen.Summarize(tl.lat)
		res.LatencyP9 = loadgen.Percentile(tl.lat, 99.9).Seconds()
		res.Lag = loadgen.Summarize(tl.lag)
		res.WallS = tl.wall.Seconds()
		res.ProxyCPUS, res.SimsCPUS, res.LoadgenCPUS = tl.proxy.Seconds(), tl.sims.Seconds(), tl.self.Seconds()
		if tl.wall > 0 {
			res.ProxyCores = res.ProxyCPUS / res.WallS
			res.OtherCores = max(0, tl.other.Seconds()/res.WallS)
		}
		if res.Requests > 0 {
			res.ProxyUsPerReq = res.ProxyCPUS * 1e6 / float64(res.Requests)
			res.ProxySysUsPerReq = tl.proxySys.Seconds() * 1e6 / float64(res.Requests)
			res.ProxySwitchesPerReq = float64(tl.switches.Total()) / float64(res.Requests)
			res.ProxyInvoluntaryPerReq = float64(tl.switches.Involuntary) / float64(res.Requests)
		}
	}
	return results, nil
}

// loopResult is an open-loop run with the answers checked.
type loopResult struct {
	*loadgen.OpenLoopResult
	replicas map[string]int
}

// openLoop sends n requests at c.rate to t, round robin over t.URLs, then
// checks every answer and counts a wrong one as an error.
func openLoop(ctx context.Context, client *http.Client, t target, c *config, n int, spec func(i int) loadgen.Spec) (*loopResult, error) {
	specs := make([]loadgen.Spec, n)
	bodies := make([][]byte, n)
	urls := make([]string, n)
	for i := range n {
		specs[i] = spec(i)
		bodies[i] = loadgen.AppendBody(nil, c.model, specs[i])
		urls[i] = t.URLs[i%len(t.URLs)] + specs[i].Path()
	}
	answers := make([]answer, n)
	r, err := loadgen.RunOpenLoop(ctx, loadgen.Schedule{Rate: c.rate, N: n}, func(ctx context.Context, i int) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, urls[i], bytes.NewReader(bodies[i]))
		if err != nil {
			return err
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, err := io.ReadAll(resp.Body)
		if err != nil {
			return fmt.Errorf("reading the body: %w", err)
		}
		answers[i] = answer{status: resp.StatusCode, header: resp.Header, body: b, replica: resp.Header.Get("X-Inferrail-Replica")}
		return nil
	})
	if err != nil {
		return nil, err
	}
	out := &loopResult{OpenLoopResult: r}
	for i, a := range answers {
		if r.Errs[i] != nil {
			continue
		}
		resp := &http.Response{StatusCode: a.status, Header: a.header, Body: io.NopCloser(bytes.NewReader(a.body))}
		r.Errs[i] = loadgen.Check(resp, specs[i], nil)
		if a.replica != "" {
			if out.replicas == nil {
				out.replicas = map[string]int{}
			}
			out.replicas[a.replica]++
		}
	}
	return out, nil
}

// cpuSample is the CPU time so far of the processes a run is charged to.
type cpuSample struct {
	at       time.Time
	proxy    time.Duration
	proxySys time.Duration // the part of proxy spent in the kernel
	// switches are the proxy's context switches (loadgen.CtxSwitches).
	switches loadgen.Switches
	sims     time.Duration
	self     time.Duration
	machine  time.Duration
}

func sampleCPU(s *setup, t target) (cpuSample, error) {
	c := cpuSample{at: time.Now(), self: loadgen.SelfCPU()}
	if t.Proc != nil {
		ps, err := t.Proc.Sample()
		if err != nil {
			return c, fmt.Errorf("%s: %w", t.Name, err)
		}
		c.proxy, c.proxySys = ps.CPU, ps.SysCPU
		if c.switches, err = loadgen.CtxSwitches(t.Proc.Pid); err != nil {
			return c, fmt.Errorf("%s: %w", t.Name, err)
		}
	}
	for _, p := range s.sims {
		ps, err := p.Sample()
		if err != nil {
			return c, fmt.Errorf("%s: %w", p.Name, err)
		}
		c.sims += ps.CPU
	}
	m, err := loadgen.MachineCPU()
	if err != nil {
		return c, err
	}
	c.machine = m
	return c, nil
}

// rotation is the order of the targets in round r (from 0): the list
// rotated left by r, so that over as many rounds as targets each target
// runs once in each position.
func rotation[T any](xs []T, r int) []T {
	if len(xs) == 0 {
		return nil
	}
	k := r % len(xs)
	return append(slices.Clone(xs[k:]), xs[:k]...)
}

// runLoad starts the processes, runs every round and adds the runs to rep.
func runLoad(ctx context.Context, c *config, rep *report, stderr io.Writer) (err error) {
	s, err := startSetup(ctx, c, stderr)
	if err != nil {
		return err
	}
	defer func() {
		if serr := s.stop(); serr != nil {
			rep.fail("processes: %v", serr)
		}
	}()
	rep.NginxConf, rep.GatewayConfs = s.NginxConf, s.GatewayConfs
	for _, p := range append(slices.Clone(s.sims), s.proxies...) {
		rep.Processes = append(rep.Processes, newProcInfo(p))
	}
	// The throughput runs come after the open-loop rounds; a round runs
	// again only if there is time for it and for them.
	reserve := wrkBudget(c)

	redone, attempt := 0, 1
	for r := 0; r < c.rounds; {
		t0 := time.Now()
		var runs []*runResult
		for _, mode := range c.modes {
			res, err := measureRound(ctx, c, s, rotation(s.targets, r), mode, r+1, attempt)
			if err != nil {
				return err
			}
			for _, run := range res {
				fmt.Fprintf(stderr, "gwload: round %d %-18s %-6s p50 %s p99 %s lag p99 %s errors %d (+%d warm-up) proxy %.2f cores, other %.2f cores\n",
					r+1, run.Target, mode, us(run.Latency.P50S), us(run.Latency.P99S), us(run.Lag.P99S), run.Errors, run.WarmupErrors, run.ProxyCores, run.OtherCores)
			}
			runs = append(runs, res...)
		}
		deadline, _ := ctx.Deadline()
		took := time.Since(t0)
		// Time for the redo: what is left after the throughput runs and the
		// rounds still to come.
		left := time.Until(deadline) - reserve - time.Duration(c.rounds-r-1)*took
		if worst, again := redoRound(runs, c.maxOther, c.redo-redone, left, took); again {
			fmt.Fprintf(stderr, "gwload: round %d discarded: other processes used %.2f cores (over %.2f); running it again\n", r+1, worst, c.maxOther)
			for _, run := range runs {
				run.Discarded = true
			}
			rep.Discarded = append(rep.Discarded, runs...)
			redone++
			attempt++
			continue
		}
		rep.Runs = append(rep.Runs, runs...)
		r, attempt = r+1, 1
	}
	if err := allAlive(s); err != nil {
		return err
	}
	if c.wrk != "" {
		rep.Throughput = runThroughput(ctx, c, s, stderr)
		if err := allAlive(s); err != nil {
			return fmt.Errorf("throughput: %w", err)
		}
	}
	return nil
}

// allAlive reports a process of s that died.
func allAlive(s *setup) error {
	for _, p := range append(slices.Clone(s.sims), s.proxies...) {
		if !p.Alive() {
			return fmt.Errorf("%s died during the runs: %s", p.Name, p.Output())
		}
	}
	return nil
}

// redoRound reports whether a round should run again, and the most CPU
// other processes used during one of its runs. A round that shared the CPUs
// with something else says more about that than about the proxies, so it
// runs again while redos are left and the time left holds two more of it.
func redoRound(runs []*runResult, maxOther float64, redosLeft int, left, took time.Duration) (worst float64, again bool) {
	for _, run := range runs {
		worst = max(worst, run.OtherCores)
	}
	return worst, worst > maxOther && redosLeft > 0 && left > 2*took
}

// us renders seconds as microseconds.
func us(s float64) string { return strconv.FormatFloat(s*1e6, 'f', 0, 64) + " µs" }
