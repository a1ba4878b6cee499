package sched

import (
	"reflect"
	"time"
)

// llm-d's data producers and data-layer plugins feed its scorers; in
// Inferrail the same data comes from the replica actors (the estimate
// broadcast, the KV index, the load scrape), configured in the gateway's
// own sections. They are accepted so that llm-d's configs load unchanged:
// each names the signal it stands for, and a parameter set to other than
// its default is reported as having no effect, with where Inferrail
// configures it.

// noEffect warns about each parameter of f the document sets to other
// than its default.
func noEffect(f *Fields, where string, params []Param) {
	for _, p := range params {
		var v any
		switch p.Default.(type) {
		case bool:
			v = f.Bool(p.Name)
		case int:
			v = f.Int(p.Name)
		case string:
			v = f.String(p.Name)
		case time.Duration:
			v = f.Duration(p.Name)
		default: // an object of another project's schema, not read further
			switch v, set, _ := f.lookup(p.Name); {
			case !set:
			case reflect.TypeOf(v) != reflect.TypeFor[map[string]any]():
				f.Fail(p.Name, "want a mapping, got %s", Describe(v))
			default:
				f.Warn(p.Name, "has no effect in Inferrail: %s", where)
			}
			continue
		}
		if f.Set(p.Name) && !reflect.DeepEqual(v, p.Default) {
			f.Warn(p.Name, "has no effect in Inferrail: %s", where)
		}
	}
}

// opaque is a parameter holding an object of another project's
// configuration (llm-d-kv-cache's), which Inferrail does not read.
func opaque(name, doc string) Param { return Param{Name: name, Doc: doc} }

var approxParams = []Param{
	{Name: "autoTune", Default: true, Doc: "Size the index from the engines' reports."},
	{Name: "blockSizeTokens", Default: 16, Doc: "Tokens per hashed block."},
	{Name: "maxPrefixBlocksToMatch", Default: 2048, Doc: "Most blocks matched."},
	{Name: "maxPrefixTokensToMatch", Default: 131072, Doc: "Most tokens matched."},
	{Name: "lruCapacityPerServer", Default: 31250, Doc: "Blocks remembered per replica."},
	{Name: "blockSize", Default: 0, Doc: "Deprecated by llm-d for blockSizeTokens."},
}

var approxPrefixCacheProducer = Type{
	Name: "approx-prefix-cache-producer", Kind: KindProducer, Signals: SignalEstimates | SignalTokens,
	Doc: "The prefix match predicted from the prompts routed to each replica: Inferrail's shadow " +
		"index, sized by `index` and each replica's `kv_capacity_blocks`, hashed with the model's " +
		"`block_size`. Its parameters are accepted and have no effect.",
	Params: approxParams,
	New: func(f *Fields) any {
		noEffect(f, "the shadow index is configured by index, kv_capacity_blocks and the model's block_size", approxParams)
		return nil
	},
}

var preciseParams = []Param{
	{Name: "sessionManager", Default: "", Doc: "A session cache manager plugin."},
	opaque("tokenProcessorConfig", "llm-d-kv-cache's block hashing."),
	opaque("indexerConfig", "llm-d-kv-cache's indexer."),
	opaque("kvEventsConfig", "llm-d-kv-cache's KV-event pool."),
	{Name: "speculativeIndexing", Default: false, Doc: "Index routed prompts before their events arrive."},
	{Name: "speculativeTTL", Default: 2 * time.Second, Doc: "Lifetime of a speculative entry."},
}

var precisePrefixCacheProducer = Type{
	Name: "precise-prefix-cache-producer", Kind: KindProducer, Signals: SignalEstimates | SignalTokens | SignalKVEvents,
	Doc: "The prefix match from the engines' KV events: Inferrail's KV-event index, for the " +
		"replicas that set `kv_events` (the others keep the shadow index's prediction). Its parameters " +
		"are accepted and have no effect.",
	Params: preciseParams,
	New: func(f *Fields) any {
		noEffect(f, "the KV-event index follows each replica's kv_events and the model's block_size", preciseParams)
		return nil
	},
}

var inflightParams = []Param{
	{Name: "addEstimatedOutputTokens", Default: false, Doc: "Count an estimate of the output tokens too."},
	{Name: "maxEstimatedOutputTokens", Default: 0, Doc: "Bound of that estimate."},
	producerParam("prefixMatchInfoProducerName", "prefix match"),
}

var inflightLoadProducer = Type{
	Name: "inflight-load-producer", Kind: KindProducer, Signals: SignalEstimates,
	Doc: "Requests and tokens in flight per replica: the gateway's own counts and each replica's " +
		"pending tokens. Its parameters are accepted and have no effect.",
	Params: inflightParams,
	New: func(f *Fields) any {
		noEffect(f, "pending tokens are the uncached prompt tokens of the requests awaiting their first byte", inflightParams)
		return nil
	},
}

var metricsParams = []Param{
	{Name: "scheme", Default: "http", Doc: "Scheme of the engines' metrics pages."},
	{Name: "path", Default: "/metrics", Doc: "Path of the engines' metrics pages."},
	{Name: "insecureSkipVerify", Default: true, Doc: "Skip TLS verification."},
}

var metricsDataSource = Type{
	Name: "metrics-data-source", Kind: KindProducer, Signals: SignalLoad,
	Doc: "The engines' metrics pages: Inferrail's load scrape, configured by `load`. Its " +
		"parameters are accepted and have no effect.",
	Params: metricsParams,
	New: func(f *Fields) any {
		noEffect(f, "the load section configures the scrape of each engine's /metrics", metricsParams)
		return nil
	},
}

var extractorParams = []Param{{Name: "defaultEngine", Default: "vllm", Doc: "Engine whose metric names are read."}}

var coreMetricsExtractor = Type{
	Name: "core-metrics-extractor", Kind: KindProducer, Signals: SignalLoad,
	Doc: "Reads running and waiting requests and KV cache usage from the metrics pages: Inferrail's " +
		"load parser, which knows each replica's `engine`. Its parameter is accepted and has no effect.",
	Params: extractorParams,
	New: func(f *Fields) any {
		noEffect(f, "each replica's engine names its metrics", extractorParams)
		return nil
	},
}
