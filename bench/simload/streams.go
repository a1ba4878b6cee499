package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/inferrail/inferrail/bench/loadgen"
)

// streamsConfig shapes benchmark 1: many concurrent SSE streams against one
// simulator with its default latency model.
type streamsConfig struct {
	Streams int `json:"streams"`
	// max_tokens of stream i is MinTokens + i mod (MaxTokens-MinTokens+1).
	MinTokens int `json:"min_tokens"`
	MaxTokens int `json:"max_tokens"`
	// MaxNumSeqs is --max-num-seqs, at least Streams so that all run at once.
	MaxNumSeqs int `json:"max_num_seqs"`
	// GPUBlocks is --num-gpu-blocks-override, enough for every stream's blocks.
	GPUBlocks int `json:"num_gpu_blocks_override"`
	// BatchedTokens is --max-num-batched-tokens. Admission also needs step
	// budget: at vLLM's 2048, running decodes leave room for only a few
	// dozen new prompts a step, and the first streams finish before the
	// last are admitted. A budget above every prompt's tokens admits all.
	BatchedTokens int           `json:"max_num_batched_tokens"`
	Timeout       time.Duration `json:"timeout_ns"`
}

// pacedSimArgs are the simulator flags of the paced runs (benchmarks 1 and 2).
func (c streamsConfig) pacedSimArgs(model string) []string {
	return []string{"--served-model-name", model,
		"--max-num-seqs", fmt.Sprint(c.MaxNumSeqs),
		"--num-gpu-blocks-override", fmt.Sprint(c.GPUBlocks),
		"--max-num-batched-tokens", fmt.Sprint(c.BatchedTokens)}
}

// specs returns the workload: Streams chat requests, all streamed with usage
// when stream is true, all non-streamed otherwise.
func (c streamsConfig) specs(tag string, stream bool) []loadgen.Spec {
	out := make([]loadgen.Spec, c.Streams)
	span := c.MaxTokens - c.MinTokens + 1
	for i := range out {
		out[i] = loadgen.Spec{Chat: true, Stream: stream, Usage: stream,
			MaxTokens: c.MinTokens + i%span, Prompt: promptFor(tag, i)}
	}
	return out
}

// cpuPoint is one measurement of simulator CPU per generated token.
type cpuPoint struct {
	Mode            string  `json:"mode"`
	Requests        int     `json:"requests"`
	Concurrency     int     `json:"concurrency"`
	Errors          int     `json:"errors"`
	Tokens          int64   `json:"generated_tokens"`
	WallS           float64 `json:"wall_s"`
	SimCPUS         float64 `json:"sim_cpu_s"`
	ClientCPUS      float64 `json:"client_cpu_s"`
	SimUsPerToken   float64 `json:"sim_cpu_us_per_token"`
	SimUsPerRequest float64 `json:"sim_cpu_us_per_request"`
	ClientUsPerTok  float64 `json:"client_cpu_us_per_token"`
	SimCores        float64 `json:"sim_cores"` // sim CPU / wall: how many cores it kept busy
	ClientCores     float64 `json:"client_cores"`
	// OtherCores is what every other process on the machine kept busy
	// meanwhile (all CPU time in /proc/stat less the simulator's and the
	// load generator's): the noise the figures were taken under.
	OtherCores   float64 `json:"other_processes_cores"`
	TokensPerSec float64 `json:"tokens_per_s"`
}

// loadRun is the bookkeeping around one load run against one simulator.
type loadRun struct {
	sim        *loadgen.Proc
	before     loadgen.ProcSample
	clientCPU  time.Duration
	machineCPU time.Duration
	start      time.Time
}

func beginRun(sim *loadgen.Proc) (*loadRun, error) {
	s, err := sim.Sample()
	if err != nil {
		return nil, err
	}
	m, err := loadgen.MachineCPU()
	if err != nil {
		return nil, err
	}
	return &loadRun{sim: sim, before: s, clientCPU: loadgen.SelfCPU(), machineCPU: m, start: time.Now()}, nil
}

// end closes the run and returns its CPU point and the sample it ended on.
func (r *loadRun) end(mode string, conc int, st *runStats) (cpuPoint, loadgen.ProcSample, error) {
	wall := time.Since(r.start)
	client := loadgen.SelfCPU() - r.clientCPU
	after, err := r.sim.Sample()
	if err != nil {
		return cpuPoint{}, after, err
	}
	machine, err := loadgen.MachineCPU()
	if err != nil {
		return cpuPoint{}, after, err
	}
	simCPU := after.CPU - r.before.CPU
	st.mu.Lock()
	p := cpuPoint{Mode: mode, Requests: st.ok + st.errs, Concurrency: conc, Errors: st.errs,
		Tokens: st.tokens, WallS: wall.Seconds(), SimCPUS: simCPU.Seconds(), ClientCPUS: client.Seconds()}
	st.mu.Unlock()
	if p.Tokens > 0 {
		p.SimUsPerToken = float64(simCPU.Microseconds()) / float64(p.Tokens)
		p.ClientUsPerTok = float64(client.Microseconds()) / float64(p.Tokens)
	}
	if p.Requests > 0 {
		p.SimUsPerRequest = float64(simCPU.Microseconds()) / float64(p.Requests)
	}
	if wall > 0 {
		p.SimCores = simCPU.Seconds() / wall.Seconds()
		p.ClientCores = client.Seconds() / wall.Seconds()
		p.OtherCores = max(0, (machine-r.machineCPU-simCPU-client).Seconds()/wall.Seconds())
		p.TokensPerSec = float64(p.Tokens) / wall.Seconds()
	}
	return p, after, nil
}

// streamsRaw is benchmark 1's raw numbers.
type streamsRaw struct {
	Config             streamsConfig   `json:"config"`
	SimArgs            []string        `json:"sim_args"`
	Completed          int             `json:"completed"`
	Errors             int             `json:"errors"`
	ErrorKinds         []string        `json:"error_kinds,omitempty"`
	TTFT               loadgen.Summary `json:"ttft"`
	E2E                loadgen.Summary `json:"e2e"`
	MaxRunning         float64         `json:"max_vllm_num_requests_running"`
	MaxWaiting         float64         `json:"max_vllm_num_requests_waiting"`
	SimGenTokens       float64         `json:"sim_generation_tokens_total_delta"`
	SimRSSAfterMiB     float64         `json:"sim_rss_after_mib"`
	SimPeakRSSMiB      float64         `json:"sim_vmhwm_mib"`
	SimThreadsAfter    int             `json:"sim_threads_after"`
	CPU                cpuPoint        `json:"cpu"`
	ContentChunksExact int             `json:"streams_with_exact_token_counts"`
	IdleWindow         *idleWindow     `json:"idle_window,omitempty"`
}

// idleWindow is the simulator's CPU use while the streams were all open and
// none had a token to send: the engine sleeps through one long prefill step,
// so what the simulator spends is the cost of holding the streams open.
type idleWindow struct {
	FromS             float64 `json:"from_s"`
	ToS               float64 `json:"to_s"`
	CPUS              float64 `json:"sim_cpu_s"`
	Cores             float64 `json:"sim_cores"`
	UsPerStreamSecond float64 `json:"sim_cpu_us_per_open_stream_per_s"`
	Streams           int     `json:"streams"`
}

// idleCost measures the simulator's CPU rate between the samples nearest
// after from and before to, or nil when they are under 2 s apart.
func idleCost(line []cpuAt, from, to time.Duration, streams int) *idleWindow {
	var a, b *cpuAt
	for i := range line {
		if a == nil && line[i].At >= from {
			a = &line[i]
		}
		if line[i].At <= to {
			b = &line[i]
		}
	}
	if a == nil || b == nil || b.At-a.At < 2*time.Second {
		return nil
	}
	w := &idleWindow{FromS: a.At.Seconds(), ToS: b.At.Seconds(), CPUS: (b.CPU - a.CPU).Seconds(), Streams: streams}
	w.Cores = w.CPUS / (w.ToS - w.FromS)
	w.UsPerStreamSecond = w.Cores * 1e6 / float64(streams)
	return w
}

// cpuAt is the simulator's CPU time used since a run's start, at a moment.
type cpuAt struct {
	At  time.Duration
	CPU time.Duration
}

// runStreams is benchmark 1: every stream completes with zero errors and
// exactly max_tokens content chunks, usage.completion_tokens and tokens of
// text; all of them run in the engine at once.
func runStreams(ctx context.Context, bin, model string, cfg streamsConfig) (*benchResult, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	res := &benchResult{ID: 1, Title: fmt.Sprintf("%s concurrent SSE streams (default latency model)", loadgen.Thousands(cfg.Streams))}
	raw := &streamsRaw{Config: cfg}
	res.Raw = raw
	sim, err := loadgen.StartSim(ctx, bin, cfg.pacedSimArgs(model)...)
	if err != nil {
		return nil, err
	}
	raw.SimArgs = sim.Args
	c := newLoadClient(sim.URL, model, cfg.Streams+8)
	defer c.close()
	gen0, err := c.metric(ctx, "vllm:generation_tokens_total")
	if err != nil {
		sim.Stop()
		return nil, err
	}

	st := &runStats{}
	run, err := beginRun(sim)
	if err != nil {
		sim.Stop()
		return nil, err
	}
	// Watch the engine's queue while the streams run, to show they ran at
	// once, and the simulator's CPU time, to split it at the first token.
	var maxRunning, maxWaiting float64
	var cpuLine []cpuAt
	pollCtx, stopPoll := context.WithCancel(ctx)
	var polling sync.WaitGroup
	polling.Go(func() {
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-pollCtx.Done():
				return
			case <-tick.C:
			}
			if s, err := sim.Sample(); err == nil {
				cpuLine = append(cpuLine, cpuAt{time.Since(run.start), s.CPU - run.before.CPU})
			}
			page, err := c.metricsPage(pollCtx)
			if err != nil {
				continue
			}
			if v, ok := loadgen.PromSum(page, "vllm:num_requests_running"); ok {
				maxRunning = max(maxRunning, v)
			}
			if v, ok := loadgen.PromSum(page, "vllm:num_requests_waiting"); ok {
				maxWaiting = max(maxWaiting, v)
			}
		}
	})

	c.burst(ctx, cfg.specs("stream", true), st)
	cpu, after, err := run.end("streamed, paced, "+loadgen.Thousands(cfg.Streams)+" at once", cfg.Streams, st)
	stopPoll()
	polling.Wait()
	if err != nil {
		sim.Stop()
		return nil, err
	}
	gen1, gerr := c.metric(ctx, "vllm:generation_tokens_total")
	if serr := sim.Stop(); serr != nil {
		res.fail("simulator: %v", serr)
	}
	if gerr != nil {
		res.fail("reading /metrics after the run: %v", gerr)
	}

	raw.Completed, raw.Errors, raw.ErrorKinds = st.ok, st.errs, st.errorList()
	raw.ContentChunksExact = st.ok // a stream is ok only if its chunks, usage and text all counted max_tokens
	raw.TTFT, raw.E2E = loadgen.Summarize(st.ttft), loadgen.Summarize(st.latency)
	raw.MaxRunning, raw.MaxWaiting = maxRunning, maxWaiting
	raw.SimGenTokens = gen1 - gen0
	raw.SimRSSAfterMiB, raw.SimPeakRSSMiB, raw.SimThreadsAfter = loadgen.MiB(after.RSSKiB), loadgen.MiB(after.HWMKiB), after.Threads
	raw.CPU = cpu
	raw.IdleWindow = idleCost(cpuLine, time.Second,
		time.Duration((raw.TTFT.P90S-0.5)*float64(time.Second)), cfg.Streams)

	res.add("wall time", fmt.Sprintf("%.2f s", cpu.WallS))
	res.bound("streams completed / errors", fmt.Sprintf("%s / %d", loadgen.Thousands(raw.Completed), raw.Errors),
		fmt.Sprintf("%s / 0", loadgen.Thousands(cfg.Streams)), raw.Errors == 0 && raw.Completed == cfg.Streams)
	if len(raw.ErrorKinds) > 0 {
		res.fail("errors: %s", strings.Join(raw.ErrorKinds, "; "))
	}
	res.bound("streams with content chunks = usage.completion_tokens = max_tokens",
		fmt.Sprintf("%s / %s", loadgen.Thousands(raw.ContentChunksExact), loadgen.Thousands(cfg.Streams)), "all", raw.ContentChunksExact == cfg.Streams)
	res.bound("max running at once (vllm:num_requests_running)", loadgen.Thousands(int(raw.MaxRunning)),
		loadgen.Thousands(cfg.Streams), raw.MaxRunning >= float64(cfg.Streams))
	res.add("TTFT p50 / p99", fmt.Sprintf("%.2f s / %.2f s", raw.TTFT.P50S, raw.TTFT.P99S))
	res.add("stream duration p50 / p99", fmt.Sprintf("%.2f s / %.2f s", raw.E2E.P50S, raw.E2E.P99S))
	res.bound("generated tokens, client / vllm:generation_tokens_total", fmt.Sprintf("%s / %s", loadgen.Thousands(int(cpu.Tokens)), loadgen.Thousands(int(raw.SimGenTokens))),
		"equal", gerr == nil && int64(raw.SimGenTokens) == st.tokens)
	res.add("sim CPU / load generator CPU", fmt.Sprintf("%.2f s (%.2f cores) / %.2f s", cpu.SimCPUS, cpu.SimCores, cpu.ClientCPUS))
	res.add("sim CPU per generated token", fmt.Sprintf("%.1f µs", cpu.SimUsPerToken))
	if w := raw.IdleWindow; w != nil {
		res.add("sim CPU while all streams waited on prefill (no token to send)",
			fmt.Sprintf("%.2f cores from %.1f s to %.1f s: %.0f µs per open stream per second", w.Cores, w.FromS, w.ToS, w.UsPerStreamSecond))
	}
	res.add("other processes on the machine", fmt.Sprintf("%.2f cores", cpu.OtherCores))
	res.add("sim RSS after / VmHWM", fmt.Sprintf("%.1f MiB / %.1f MiB", raw.SimRSSAfterMiB, raw.SimPeakRSSMiB))
	return res, nil
}
