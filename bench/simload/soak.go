package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/inferrail/inferrail/bench/loadgen"
)

// soakConfig shapes benchmark 3: resident memory over a long mixed run.
type soakConfig struct {
	Warmup      int           `json:"warmup_requests"`
	Requests    int           `json:"requests"`
	Concurrency int           `json:"concurrency"`
	BoundMiB    float64       `json:"rss_growth_bound_mib"` // from after the warm-up to after the soak
	Timeout     time.Duration `json:"timeout_ns"`
}

// soakSpec is request i of the soak: it cycles through chat and completions,
// streamed (with and without the usage chunk) and not, with 1 to 32 tokens,
// and a distinct prompt so the prefix cache keeps turning over.
func soakSpec(tag string, i int) loadgen.Spec {
	return loadgen.Spec{
		Chat:      i%2 == 0,
		Stream:    i%4 < 2,
		Usage:     i%8 < 4,
		MaxTokens: 1 + (i*7)%32,
		Prompt:    promptFor(tag, i),
	}
}

// soakRaw is benchmark 3's raw numbers.
type soakRaw struct {
	Config          soakConfig `json:"config"`
	SimArgs         []string   `json:"sim_args"`
	WarmupErrors    int        `json:"warmup_errors"`
	SoakOK          int        `json:"soak_ok"`
	SoakErrors      int        `json:"soak_errors"`
	ErrorKinds      []string   `json:"error_kinds,omitempty"`
	RSSStartMiB     float64    `json:"rss_at_start_mib"`
	RSSWarmMiB      float64    `json:"rss_after_warmup_mib"`
	RSSEndMiB       float64    `json:"rss_after_soak_mib"`
	RSSMaxMiB       float64    `json:"rss_max_sampled_mib"`
	HWMMiB          float64    `json:"vmhwm_mib"`
	GrowthMiB       float64    `json:"rss_growth_mib"`
	RSSSamples      int        `json:"rss_samples"`
	FDsWarm         int        `json:"fds_after_warmup"`
	FDsEnd          int        `json:"fds_after_soak"`
	ThreadsWarm     int        `json:"threads_after_warmup"`
	ThreadsEnd      int        `json:"threads_after_soak"`
	RunningAfter    float64    `json:"vllm_num_requests_running_after"`
	RequestsPerSec  float64    `json:"requests_per_s"`
	CPU             cpuPoint   `json:"cpu"`
	RSSTimelineMiB  []float64  `json:"rss_timeline_mib"` // one sample per second
	TimelineEverySe float64    `json:"rss_timeline_every_s"`
}

// runSoak is benchmark 3: VmRSS after a warm-up and after the soak differ by
// at most BoundMiB, with zero errors and nothing left running.
func runSoak(ctx context.Context, bin, model string, cfg soakConfig) (*benchResult, error) {
	ctx, cancel := context.WithTimeout(ctx, cfg.Timeout)
	defer cancel()
	res := &benchResult{ID: 3, Title: fmt.Sprintf("RSS over a %s-request soak (--zero-latency)", loadgen.Thousands(cfg.Requests))}
	raw := &soakRaw{Config: cfg, TimelineEverySe: 1}
	res.Raw = raw
	sim, err := loadgen.StartSim(ctx, bin, "--zero-latency", "--served-model-name", model)
	if err != nil {
		return nil, err
	}
	raw.SimArgs = sim.Args
	c := newLoadClient(sim.URL, model, cfg.Concurrency+8)
	defer c.close()
	s0, err := sim.Sample()
	if err != nil {
		sim.Stop()
		return nil, err
	}
	raw.RSSStartMiB = loadgen.MiB(s0.RSSKiB)

	warm := &runStats{}
	c.pool(ctx, cfg.Warmup, cfg.Concurrency, func(i int) loadgen.Spec { return soakSpec("warmup", i) }, warm)
	raw.WarmupErrors = warm.errs
	sw, err := sim.Sample()
	if err != nil {
		sim.Stop()
		return nil, err
	}
	raw.RSSWarmMiB, raw.FDsWarm, raw.ThreadsWarm = loadgen.MiB(sw.RSSKiB), sw.FDs, sw.Threads

	// Sample RSS every 100 ms for the maximum, keep one a second for the timeline.
	maxKiB := sw.RSSKiB
	var timeline []float64
	samples := 0
	stop := make(chan struct{})
	var sampling sync.WaitGroup
	sampling.Go(func() {
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			s, err := sim.Sample()
			if err != nil {
				continue
			}
			maxKiB = max(maxKiB, s.RSSKiB)
			if samples%10 == 0 {
				timeline = append(timeline, loadgen.MiB(s.RSSKiB))
			}
			samples++
		}
	})

	st := &runStats{}
	run, err := beginRun(sim)
	if err != nil {
		close(stop)
		sampling.Wait()
		sim.Stop()
		return nil, err
	}
	c.pool(ctx, cfg.Requests, cfg.Concurrency, func(i int) loadgen.Spec { return soakSpec("soak", i) }, st)
	cpu, se, err := run.end(fmt.Sprintf("soak mix, zero-latency, concurrency %d", cfg.Concurrency), cfg.Concurrency, st)
	close(stop)
	sampling.Wait()
	if err != nil {
		sim.Stop()
		return nil, err
	}
	running, rerr := c.metric(ctx, "vllm:num_requests_running")
	if serr := sim.Stop(); serr != nil {
		res.fail("simulator: %v", serr)
	}
	raw.SoakOK, raw.SoakErrors = st.ok, st.errs
	raw.ErrorKinds = append(warm.errorList(), st.errorList()...)
	raw.RSSEndMiB, raw.HWMMiB = loadgen.MiB(se.RSSKiB), loadgen.MiB(se.HWMKiB)
	raw.RSSMaxMiB = loadgen.MiB(max(maxKiB, se.RSSKiB))
	raw.GrowthMiB = raw.RSSEndMiB - raw.RSSWarmMiB
	raw.RSSSamples, raw.RSSTimelineMiB = samples, timeline
	raw.FDsEnd, raw.ThreadsEnd = se.FDs, se.Threads
	raw.RunningAfter = running
	raw.CPU = cpu
	if cpu.WallS > 0 {
		raw.RequestsPerSec = float64(cpu.Requests) / cpu.WallS
	}

	if ctx.Err() != nil {
		res.fail("soak did not finish within %v: %d of %d requests", cfg.Timeout, st.ok+st.errs, cfg.Requests)
	}
	res.bound("RSS growth, after warm-up → after soak",
		fmt.Sprintf("%+.1f MiB (%.1f → %.1f MiB)", raw.GrowthMiB, raw.RSSWarmMiB, raw.RSSEndMiB),
		fmt.Sprintf("≤ %.0f MiB", cfg.BoundMiB), raw.GrowthMiB <= cfg.BoundMiB)
	res.add("RSS max sampled / VmHWM", fmt.Sprintf("%.1f MiB / %.1f MiB", raw.RSSMaxMiB, raw.HWMMiB))
	res.bound("requests ok / errors", fmt.Sprintf("%s / %d (warm-up %s / %d)",
		loadgen.Thousands(raw.SoakOK), raw.SoakErrors, loadgen.Thousands(cfg.Warmup-raw.WarmupErrors), raw.WarmupErrors),
		"errors = 0", raw.SoakErrors+raw.WarmupErrors == 0 && raw.SoakOK == cfg.Requests)
	if len(raw.ErrorKinds) > 0 {
		res.fail("errors: %s", strings.Join(raw.ErrorKinds, "; "))
	}
	res.bound("requests left running (vllm:num_requests_running)", fmt.Sprintf("%.0f", running), "0", rerr == nil && running == 0)
	if rerr != nil {
		res.fail("reading /metrics after the soak: %v", rerr)
	}
	res.add("throughput", fmt.Sprintf("%.0f req/s, %.0f tokens/s over %.1f s", raw.RequestsPerSec, cpu.TokensPerSec, cpu.WallS))
	res.add("CPU of sim / load generator / other processes", fmt.Sprintf("%.2f / %.2f / %.2f cores (sim %.1f µs/request)",
		cpu.SimCores, cpu.ClientCores, cpu.OtherCores, cpu.SimUsPerRequest))
	res.add("sim fds / threads, after warm-up → after soak",
		fmt.Sprintf("%d → %d / %d → %d", raw.FDsWarm, raw.FDsEnd, raw.ThreadsWarm, raw.ThreadsEnd))
	return res, nil
}
