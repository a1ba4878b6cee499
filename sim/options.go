package sim

import (
	"errors"
	"flag"
	"fmt"
	"time"

	"github.com/inferrail/inferrail/model/kvevent"
	"github.com/inferrail/inferrail/sim/engine"
)

// Options configure a simulator. Flag names follow vLLM's where vLLM has one.
type Options struct {
	Host string // --host (127.0.0.1)
	Port int    // --port (8000); 0 picks a free port
	// Model is the model path reported as the card's root (--model).
	Model string
	// ServedModelNames are the names clients may request (--served-model-name);
	// empty means Model.
	ServedModelNames []string
	Version          string // reported by /version and in system_fingerprint

	Engine engine.Config

	EnablePromptTokensDetails bool // --enable-prompt-tokens-details
	// KVEventsConfig is --kv-events-config: vLLM's JSON, or SGLang's with
	// KVEventsFormat "sglang".
	KVEventsConfig string
	// KVEventsFormat is whose KV events the simulator publishes
	// (--kv-events-format): "vllm" (the default) or "sglang", SGLang's
	// schema and encoding with one event per block, a radix node's
	// evictions in one BlockRemoved, replays without the topic frame, its
	// --kv-events-config and its bind rule.
	KVEventsFormat string
	// KVEventsEncoding is vLLM's layout: "map" (vLLM ≥ 0.23, the default)
	// or "array" (≤ 0.22).
	KVEventsEncoding string
	// KVEventsBind binds the PUB endpoint even where vLLM would connect to
	// it, such as tcp://127.0.0.1:0: in-process fleets publish on loopback
	// ports picked by the kernel (EventEndpoints tells them). No flag.
	KVEventsBind bool
	// MetricsOmit names families left off /metrics (--metrics-omit), as an
	// engine without them would serve its page: llm-d's inference simulator
	// has no prefix-cache counters.
	MetricsOmit []string

	// SSLCertFile and SSLKeyFile serve https (--ssl-certfile,
	// --ssl-keyfile), rereading the files when they change.
	SSLCertFile, SSLKeyFile string
	// APIKey guards the /v1 routes as vLLM's --api-key does: a request
	// without Authorization: Bearer APIKEY gets 401 {"error":"Unauthorized"}.
	APIKey string
}

// DefaultOptions are the simulator's defaults: an 8B model on one 24 GB GPU.
func DefaultOptions() Options {
	return Options{
		Host:             "127.0.0.1",
		Port:             8000,
		Model:            "inferrail/sim-8b",
		Version:          "0.26.0",
		KVEventsFormat:   "vllm",
		KVEventsEncoding: "map",
		Engine: engine.Config{
			BlockSize:        16,
			NumBlocks:        4096,
			MaxNumSeqs:       256,
			MaxBatchedTokens: 2048,
			MaxModelLen:      32768,
			PrefixCaching:    true,
			Latency: engine.Latency{
				PrefillToken: 100 * time.Microsecond,
				PrefillPair:  3.3,
				PrefillFixed: 5 * time.Millisecond,
				DecodeToken:  20 * time.Millisecond,
				DecodeSeq:    100 * time.Microsecond,
			},
		},
	}
}

// Names returns the served model names.
func (o *Options) Names() []string {
	if len(o.ServedModelNames) > 0 {
		return o.ServedModelNames
	}
	return []string{o.Model}
}

// Validate reports every problem with o at once.
func (o *Options) Validate() error {
	var errs []error
	if o.Port < 0 || o.Port > 65535 {
		errs = append(errs, fmt.Errorf("--port %d: out of range", o.Port))
	}
	if o.Model == "" {
		errs = append(errs, errors.New("--model: empty"))
	}
	if (o.SSLCertFile == "") != (o.SSLKeyFile == "") {
		errs = append(errs, errors.New("--ssl-certfile and --ssl-keyfile go together"))
	}
	if o.KVEventsEncoding != "map" && o.KVEventsEncoding != "array" {
		errs = append(errs, fmt.Errorf("--kv-events-encoding %q: want map or array", o.KVEventsEncoding))
	}
	if !kvevent.Engine(o.KVEventsFormat).Known() {
		errs = append(errs, fmt.Errorf("--kv-events-format %q: want vllm or sglang", o.KVEventsFormat))
	}
	return errors.Join(errs...)
}

// stringList is a repeatable, also space-free comma-less string flag.
type stringList []string

func (s *stringList) String() string     { return fmt.Sprint([]string(*s)) }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }

// boolNeg is a --no-X flag clearing a bool.
type boolNeg struct{ p *bool }

func (b boolNeg) String() string   { return "" }
func (b boolNeg) IsBoolFlag() bool { return true }
func (b boolNeg) Set(v string) error {
	if v == "true" {
		*b.p = false
	} else if v != "false" {
		return fmt.Errorf("invalid boolean %q", v)
	}
	return nil
}

// durFlag reads a number in unit u into a time.Duration.
type durFlag struct {
	p *time.Duration
	u time.Duration
}

func (d durFlag) String() string {
	if d.p == nil {
		return ""
	}
	return fmt.Sprint(float64(*d.p) / float64(d.u))
}
func (d durFlag) Set(v string) error {
	var f float64
	if _, err := fmt.Sscan(v, &f); err != nil || f < 0 {
		return fmt.Errorf("want a non-negative number, got %q", v)
	}
	*d.p = time.Duration(f * float64(d.u))
	return nil
}

// RegisterFlags binds o's fields to vLLM-style flags on fs.
func (o *Options) RegisterFlags(fs *flag.FlagSet) {
	e := &o.Engine
	fs.StringVar(&o.Host, "host", o.Host, "address to listen on")
	fs.IntVar(&o.Port, "port", o.Port, "port to listen on (0 picks a free one)")
	fs.StringVar(&o.Model, "model", o.Model, "model path, reported as the model card's root")
	fs.Var((*stringList)(&o.ServedModelNames), "served-model-name", "a name clients may request (repeatable; default: --model)")
	fs.StringVar(&o.Version, "version-string", o.Version, "vLLM version to report")
	fs.IntVar(&e.BlockSize, "block-size", e.BlockSize, "tokens per KV block")
	fs.IntVar(&e.NumBlocks, "num-gpu-blocks-override", e.NumBlocks, "KV cache capacity in blocks")
	fs.IntVar(&e.MaxNumSeqs, "max-num-seqs", e.MaxNumSeqs, "running sequence cap")
	fs.IntVar(&e.MaxBatchedTokens, "max-num-batched-tokens", e.MaxBatchedTokens, "tokens one step may compute; longer prompts prefill in chunks")
	fs.IntVar(&e.MaxModelLen, "max-model-len", e.MaxModelLen, "context length")
	fs.BoolVar(&e.PrefixCaching, "enable-prefix-caching", e.PrefixCaching, "keep finished blocks for prefix hits")
	fs.Var(boolNeg{&e.PrefixCaching}, "no-enable-prefix-caching", "keep no finished blocks")
	fs.BoolVar(&o.EnablePromptTokensDetails, "enable-prompt-tokens-details", o.EnablePromptTokensDetails, "report cached tokens in usage.prompt_tokens_details")
	fs.StringVar(&o.KVEventsConfig, "kv-events-config", o.KVEventsConfig, `publish KV events, as the engine's flag (JSON: vLLM's '{"enable_kv_cache_events": true}', SGLang's '{"publisher": "zmq"}')`)
	fs.Var((*stringList)(&o.MetricsOmit), "metrics-omit", "leave a family off /metrics, such as vllm:prefix_cache_queries (repeatable; not a vLLM flag)")
	fs.StringVar(&o.KVEventsFormat, "kv-events-format", o.KVEventsFormat, "whose KV events to publish: vllm or sglang")
	fs.StringVar(&o.KVEventsEncoding, "kv-events-encoding", o.KVEventsEncoding, "vLLM's KV event layout: map (vLLM >= 0.23) or array (<= 0.22)")
	fs.Var(durFlag{&e.Latency.PrefillToken, time.Microsecond}, "prefill-token-us", "prefill cost a per uncached token, µs")
	fs.Float64Var(&e.Latency.PrefillPair, "prefill-pair-ns", e.Latency.PrefillPair, "prefill cost b per token pair, ns")
	fs.Var(durFlag{&e.Latency.PrefillFixed, time.Millisecond}, "prefill-fixed-ms", "fixed prefill cost d per prompt, ms")
	fs.Var(durFlag{&e.Latency.DecodeToken, time.Millisecond}, "decode-token-ms", "decode step time for one sequence, ms")
	fs.Var(durFlag{&e.Latency.DecodeSeq, time.Microsecond}, "decode-seq-us", "time each further sequence adds to a decode step, µs")
	fs.BoolVar(&e.Latency.Zero, "zero-latency", e.Latency.Zero, "answer as fast as possible, for overhead benchmarks")
}

// RegisterServerFlags binds the options of one simulator's own server,
// which a fleet of them (inferrail launch) does not share: --ssl-certfile,
// --ssl-keyfile and --api-key, as vLLM's.
func (o *Options) RegisterServerFlags(fs *flag.FlagSet) {
	fs.StringVar(&o.SSLCertFile, "ssl-certfile", o.SSLCertFile, "serve https with this PEM certificate chain")
	fs.StringVar(&o.SSLKeyFile, "ssl-keyfile", o.SSLKeyFile, "the PEM key of --ssl-certfile")
	fs.StringVar(&o.APIKey, "api-key", o.APIKey, "require Authorization: Bearer KEY on /v1 routes, as vLLM does")
}
