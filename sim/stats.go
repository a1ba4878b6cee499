package sim

import (
	"time"

	"github.com/inferrail/inferrail/sim/engine"
	"github.com/inferrail/inferrail/sim/vllmmetrics"
)

// engineStats feeds the engine's state into the vLLM metrics page after each
// step. It runs on the driver goroutine; the page is rendered by handlers.
type engineStats struct {
	m    *vllmmetrics.Metrics
	eng  *engine.Engine
	last engine.Stats
}

func newEngineStats(inst *instance) *engineStats {
	cfg := inst.opts.Engine
	info := []vllmmetrics.Label{
		{Name: "block_size", Value: itoa(cfg.BlockSize)},
		{Name: "cache_dtype", Value: "auto"},
		{Name: "calculate_kv_scales", Value: "False"},
		{Name: "cpu_offload_gb", Value: "0"},
		{Name: "enable_prefix_caching", Value: pyBool(cfg.PrefixCaching)},
		{Name: "gpu_memory_utilization", Value: "0.9"},
		{Name: "is_attention_free", Value: "False"},
		{Name: "kv_cache_memory_bytes", Value: "None"},
		{Name: "kv_offloading_backend", Value: "None"},
		{Name: "kv_offloading_size", Value: "None"},
		{Name: "kv_sharing_fast_prefill", Value: "False"},
		{Name: "mamba_cache_dtype", Value: "auto"},
		{Name: "mamba_page_size_padded", Value: "None"},
		{Name: "mamba_ssm_cache_dtype", Value: "auto"},
		{Name: "num_cpu_blocks", Value: "None"},
		{Name: "num_gpu_blocks", Value: itoa(cfg.NumBlocks)},
		{Name: "num_gpu_blocks_override", Value: itoa(cfg.NumBlocks)},
		{Name: "prefix_caching_hash_algo", Value: "sha256"},
		{Name: "sliding_window", Value: "None"},
		{Name: "swap_space", Value: "4"},
	}
	return &engineStats{
		m:   vllmmetrics.New(inst.opts.Names()[0], cfg.MaxModelLen, info, vllmmetrics.WithoutFamilies(inst.opts.MetricsOmit...)),
		eng: inst.eng,
	}
}

func pyBool(b bool) string {
	if b {
		return "True"
	}
	return "False"
}

// onStep records one step: gauges, counter deltas, and the per-request
// histograms of requests that finished in it.
func (st *engineStats) onStep(res *engine.StepResult, end time.Duration) {
	s := st.eng.Stats()
	m := st.m
	m.SetRunning(s.Running)
	m.SetWaiting(s.Waiting)
	m.SetKVUsage(s.KVUsage)
	hits := s.PrefixHits - st.last.PrefixHits
	m.AddPrefixQueries(s.PrefixQueries - st.last.PrefixQueries)
	m.AddPrefixHits(hits)
	m.AddPreemptions(s.Preemptions - st.last.Preemptions)
	if d := s.PromptTokens - st.last.PromptTokens; d > 0 {
		// vllm:prompt_tokens counts whole prompts; split out what the cache served.
		cached := min(hits, d)
		m.AddPromptTokens(d - cached)
		m.AddCachedPromptTokens(cached)
	}
	m.AddGenerationTokens(s.GenerationTokens - st.last.GenerationTokens)
	if res.ScheduledTokens > 0 {
		m.ObserveIterationTokens(res.ScheduledTokens)
	}
	st.last = s

	for i := range res.Outputs {
		o := &res.Outputs[i]
		j := o.Req.Ctx.(*job)
		if o.NewTokens > 0 {
			if o.Req.Generated > 1 {
				j.gaps = append(j.gaps, end-j.lastToken)
			}
			j.lastToken = end
		}
		if o.Done {
			r := o.Req
			m.IncRequestSuccess(o.Reason)
			t := vllmmetrics.RequestTimes{
				E2E:              r.Finished - r.Arrival,
				InterTokenGaps:   j.gaps,
				PromptTokens:     len(r.Prompt),
				CachedTokens:     r.CachedTokens,
				GenerationTokens: r.Generated,
				MaxTokens:        j.maxParam,
			}
			if r.Generated > 0 {
				t.Queue = r.Scheduled - r.Arrival
				t.TTFT = r.FirstToken - r.Arrival
				t.Prefill = r.FirstToken - r.Scheduled
				t.Decode = r.Finished - r.FirstToken
			}
			m.ObserveRequest(t)
			j.gaps = nil
		}
	}
}
