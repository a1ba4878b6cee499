package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/inferrail/inferrail/bench/loadgen"
)

// cpuConfig shapes benchmark 2's extra runs. The paced runs reuse the shape
// of benchmark 1; the zero-latency runs measure the request path alone.
type cpuConfig struct {
	Requests    int           `json:"requests"` // per zero-latency run
	Concurrency int           `json:"concurrency"`
	Tokens      int           `json:"max_tokens"` // of each zero-latency request
	Timeout     time.Duration `json:"timeout_ns"`
}

// cpuRaw is benchmark 2's raw numbers.
type cpuRaw struct {
	Config       cpuConfig  `json:"config"`
	PacedSimArgs []string   `json:"paced_sim_args"`
	ZeroSimArgs  []string   `json:"zero_latency_sim_args"`
	Points       []cpuPoint `json:"points"`
	ErrorKinds   []string   `json:"error_kinds,omitempty"`
}

// runCPU is benchmark 2: simulator CPU time per generated token, streamed and
// not, with the default latency model (streamed is benchmark 1's run, passed
// in as streamed when it ran) and with --zero-latency.
func runCPU(ctx context.Context, bin, model string, paced streamsConfig, cfg cpuConfig, streamed *cpuPoint) (*benchResult, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	res := &benchResult{ID: 2, Title: "simulator CPU per generated token"}
	raw := &cpuRaw{Config: cfg}
	res.Raw = raw
	if streamed != nil {
		raw.Points = append(raw.Points, *streamed)
	}

	// Paced, non-streamed: benchmark 1's shape, without SSE.
	sim, err := loadgen.StartSim(ctx, bin, paced.pacedSimArgs(model)...)
	if err != nil {
		return nil, err
	}
	raw.PacedSimArgs = sim.Args
	p, errs, err := measureRun(ctx, sim, model, "non-streamed, paced, "+loadgen.Thousands(paced.Streams)+" at once",
		paced.Streams, func(c *loadClient, st *runStats) {
			c.burst(ctx, paced.specs("unary", false), st)
		})
	if serr := sim.Stop(); serr != nil {
		res.fail("simulator: %v", serr)
	}
	if err != nil {
		return nil, err
	}
	raw.Points = append(raw.Points, p)
	raw.ErrorKinds = append(raw.ErrorKinds, errs...)

	// Zero latency: the cost of the request path and the engine alone.
	sim, err = loadgen.StartSim(ctx, bin, "--zero-latency", "--served-model-name", model)
	if err != nil {
		return nil, err
	}
	raw.ZeroSimArgs = sim.Args
	for _, stream := range []bool{true, false} {
		mode := "non-streamed, zero-latency"
		if stream {
			mode = "streamed, zero-latency"
		}
		mode += fmt.Sprintf(", concurrency %d", cfg.Concurrency)
		p, errs, err := measureRun(ctx, sim, model, mode, cfg.Concurrency, func(c *loadClient, st *runStats) {
			c.pool(ctx, cfg.Requests, cfg.Concurrency, func(i int) loadgen.Spec {
				return loadgen.Spec{Chat: true, Stream: stream, Usage: stream, MaxTokens: cfg.Tokens, Prompt: promptFor("cpu", i)}
			}, st)
		})
		if err != nil {
			sim.Stop()
			return nil, err
		}
		raw.Points = append(raw.Points, p)
		raw.ErrorKinds = append(raw.ErrorKinds, errs...)
	}
	if serr := sim.Stop(); serr != nil {
		res.fail("simulator: %v", serr)
	}

	for _, p := range raw.Points {
		res.bound(p.Mode+": sim CPU per token (per request)",
			fmt.Sprintf("%.1f µs (%.0f µs); %d errors", p.SimUsPerToken, p.SimUsPerRequest, p.Errors), "errors = 0", p.Errors == 0)
	}
	if len(raw.ErrorKinds) > 0 {
		res.fail("errors: %s", strings.Join(raw.ErrorKinds, "; "))
	}
	for _, p := range raw.Points {
		res.add(p.Mode+": CPU of sim / load generator / other processes",
			fmt.Sprintf("%.2f s / %.2f s / %.2f cores over %.1f s wall (%s tokens)",
				p.SimCPUS, p.ClientCPUS, p.OtherCores, p.WallS, loadgen.Thousands(int(p.Tokens))))
	}
	return res, nil
}

// measureRun runs load against sim with a fresh client and returns its CPU
// point and error kinds.
func measureRun(ctx context.Context, sim *loadgen.Proc, model, mode string, conc int, load func(*loadClient, *runStats)) (cpuPoint, []string, error) {
	c := newLoadClient(sim.URL, model, conc+8)
	defer c.close()
	st := &runStats{}
	run, err := beginRun(sim)
	if err != nil {
		return cpuPoint{}, nil, err
	}
	load(c, st)
	p, _, err := run.end(mode, conc, st)
	if ctx.Err() != nil {
		return p, nil, fmt.Errorf("%s: %w", mode, ctx.Err())
	}
	return p, st.errorList(), err
}
