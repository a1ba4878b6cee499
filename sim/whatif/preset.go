package whatif

import (
	"fmt"
	"strings"
	"time"

	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/sim/engine"
)

// Engine is the engine model a whatif runs every replica with, and how many
// GPUs one replica takes. An Engine is a value.
type Engine struct {
	// Name names it in reports: a preset's name, "calibrated:FILE" or
	// "fit:FILE".
	Name string
	// Source says where its numbers come from, in one line.
	Source string
	// Config is every replica's engine.
	Config engine.Config
	// GPUs is how many GPUs one replica takes.
	GPUs int
}

// blockSize is the engine block size every preset uses, vLLM's default on
// CUDA (--block-size 16).
const blockSize = 16

// Shared H100 figures.
//
//   - Memory: an H100 SXM 80GB shows 81,559 MiB (nvidia-smi); vLLM takes
//     --gpu-memory-utilization 0.9 of it: 0.9 × 81,559 = 73,403 MiB, of which
//     weights, activations and CUDA graphs come off before the KV cache.
//     Activations and graphs are taken as 4,096 MiB: an assumption (vLLM
//     measures them in its profile run at startup, and its log line "GPU
//     KV cache size: N tokens" gives the result).
//   - Compute: 989 TFLOPS dense BF16 (NVIDIA H100 datasheet,
//     https://www.nvidia.com/en-us/data-center/h100/). A prefill reaches
//     part of it: the presets take 50% model FLOPs utilization on one GPU
//     and 40% across four with tensor parallelism (all-reduces after every
//     layer); both are assumptions, not measurements.
//   - Bandwidth: 3.35 TB/s HBM3 (the same datasheet). A decode step reads
//     every weight once; the presets take 80% of that bandwidth.
//   - Scheduler defaults: vLLM's EngineArgs.get_batch_defaults
//     (vllm/engine/arg_utils.py, https://github.com/vllm-project/vllm) give
//     a GPU of at least 70 GiB that is not an A100 max_num_seqs 1024 and
//     max_num_batched_tokens 8192 for the OpenAI API server.
const (
	h100UsableMiB     = 73_403 // 0.9 × 81,559 MiB
	h100ActivationMiB = 4_096
	h100MaxNumSeqs    = 1024
	h100MaxBatched    = 8192
	llama31MaxLen     = 131_072 // max_position_embeddings of Llama 3.1
)

// presets lists the named engines in the order --help shows them.
var presets = []struct {
	name, summary string
	engine        func() Engine
}{
	{"sim", "the simulator's defaults (an 8B model on one 24 GB GPU)", simPreset},
	{"h100-8b", "one H100 80GB serving a Llama-3.1-8B-class model, BF16", h100Llama8B},
	{"4xh100-70b-tp4", "four H100 80GB serving a Llama-3.1-70B-class model, BF16, tensor parallelism 4", h100Llama70B},
}

// Presets returns the preset names with a one-line summary each, in order.
func Presets() [][2]string {
	out := make([][2]string, len(presets))
	for i, p := range presets {
		out[i] = [2]string{p.name, p.summary}
	}
	return out
}

// Preset returns the named preset.
func Preset(name string) (Engine, error) {
	names := make([]string, len(presets))
	for i, p := range presets {
		if p.name == name {
			return p.engine(), nil
		}
		names[i] = p.name
	}
	return Engine{}, fmt.Errorf("unknown engine preset %q (want one of %s)", name, strings.Join(names, ", "))
}

func simPreset() Engine {
	return Engine{
		Name:   "sim",
		Source: "the simulator's defaults (sim.DefaultOptions().Engine): an 8B model on one 24 GB GPU",
		Config: sim.DefaultOptions().Engine,
		GPUs:   1,
	}
}

// h100Llama8B is one H100 80GB serving Llama-3.1-8B in BF16 with vLLM.
//
// Model (meta-llama/Llama-3.1-8B config.json): 32 layers, hidden size 4096,
// 32 query heads and 8 KV heads of head_dim 128, 8.03 B parameters.
//
//   - KV bytes per token: 32 layers × 8 kv_heads × 128 head_dim × 2 (K and V)
//     × 2 bytes = 131,072 B.
//   - KV capacity: 73,403 − 15,316 (weights, 8.03e9 × 2 B) − 4,096 = 53,991
//     MiB = 53,991 × 1,048,576 / 131,072 = 431,928 tokens = 26,995 blocks
//     of 16.
//   - a: 2 × 8.03e9 FLOP per token / (0.5 × 989e12 FLOP/s) = 32.5 µs.
//   - b: per pair of a computed and an attended token, QKᵀ and PV cost
//     2 × 2 × 4096 FLOP a layer, × 32 layers = 524,288 FLOP;
//     / (0.5 × 989e12) = 1.06 ns.
//   - Decode: one step reads the weights, 16.06e9 B / (0.8 × 3.35e12 B/s) =
//     6.0 ms, which is also d, the fixed cost of a prefill's forward pass.
//     NVIDIA's NIM benchmarks of Llama-3.1-8B-Instruct on H100
//     (https://docs.nvidia.com/nim/benchmarking/llm/1.0.0/performance, NIM
//     1.8.0) measured an inter-token latency of 4.63 ms at concurrency 1 and
//     7.57 ms at 100: TensorRT-LLM with FP8 weights reads half the bytes, so
//     BF16 on vLLM is slower than 4.63 ms. Each further sequence in a step
//     adds (7.57 − 4.63) / 99 = 29.7 µs there: DecodeSeq 30 µs.
func h100Llama8B() Engine {
	return Engine{
		Name: "h100-8b",
		Source: "derived from the H100 datasheet, Llama-3.1-8B's config and vLLM's defaults; " +
			"decode checked against NVIDIA NIM's measured inter-token latency (sim/whatif/preset.go)",
		Config: engine.Config{
			BlockSize:        blockSize,
			NumBlocks:        26_995,
			MaxNumSeqs:       h100MaxNumSeqs,
			MaxBatchedTokens: h100MaxBatched,
			MaxModelLen:      llama31MaxLen,
			PrefixCaching:    true,
			Latency: engine.Latency{
				PrefillToken: 32500 * time.Nanosecond,
				PrefillPair:  1.06,
				PrefillFixed: 6 * time.Millisecond,
				DecodeToken:  6 * time.Millisecond,
				DecodeSeq:    30 * time.Microsecond,
			},
		},
		GPUs: 1,
	}
}

// h100Llama70B is four H100 80GB serving Llama-3.1-70B in BF16 with vLLM,
// --tensor-parallel-size 4.
//
// Model (meta-llama/Llama-3.1-70B config.json): 80 layers, hidden size 8192,
// 64 query heads and 8 KV heads of head_dim 128, 70.6 B parameters.
//
//   - KV bytes per token: 80 × 8 × 128 × 2 × 2 = 327,680 B for the model;
//     tensor parallelism 4 gives each GPU 2 of the 8 KV heads: 81,920 B.
//   - KV capacity per GPU: 73,403 − 33,665 (a quarter of the weights,
//     70.6e9 × 2 B / 4) − 4,096 = 35,642 MiB = 35,642 × 1,048,576 / 81,920
//     = 456,217 tokens = 28,513 blocks of 16 (every GPU holds every token's
//     share, so that is the replica's capacity).
//   - a: 2 × 70.6e9 FLOP per token / (4 × 989e12 × 0.4) = 89.2 µs.
//   - b: 2 × 2 × 8192 FLOP a layer × 80 layers = 2,621,440 FLOP per pair;
//     / (4 × 989e12 × 0.4) = 1.66 ns.
//   - Decode: each GPU reads its quarter of the weights, 35.3e9 B /
//     (0.8 × 3.35e12 B/s) = 13.2 ms; NIM 1.3.0's Llama-3.1-70B-Instruct
//     benchmark (same page) measured 13.21 ms at concurrency 1 and 23.28 ms
//     at 100: DecodeSeq (23.28 − 13.21) / 99 = 102 µs. d is one forward
//     pass, 13.2 ms.
func h100Llama70B() Engine {
	return Engine{
		Name: "4xh100-70b-tp4",
		Source: "derived from the H100 datasheet, Llama-3.1-70B's config and vLLM's defaults; " +
			"decode from NVIDIA NIM's measured inter-token latency (sim/whatif/preset.go)",
		Config: engine.Config{
			BlockSize:        blockSize,
			NumBlocks:        28_513,
			MaxNumSeqs:       h100MaxNumSeqs,
			MaxBatchedTokens: h100MaxBatched,
			MaxModelLen:      llama31MaxLen,
			PrefixCaching:    true,
			Latency: engine.Latency{
				PrefillToken: 89200 * time.Nanosecond,
				PrefillPair:  1.66,
				PrefillFixed: 13200 * time.Microsecond,
				DecodeToken:  13200 * time.Microsecond,
				DecodeSeq:    102 * time.Microsecond,
			},
		},
		GPUs: 4,
	}
}
