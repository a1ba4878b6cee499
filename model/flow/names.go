package flow

// The request headers llm-d's flow control reads, and the response header
// it names a refusal in (shared/reference/llm-d-gie.md §1.2 and §3), in
// lower case as ext_proc carries them; fasthttp matches them in any case.
const (
	HeaderObjective  = "x-llm-d-inference-objective"
	HeaderFairnessID = "x-llm-d-inference-fairness-id"
	HeaderDropped    = "x-llm-d-request-dropped-reason"
)

// The request headers that carry a request's latency objective in
// milliseconds (llm-d's latency plugins and slo-deadline-ordering-policy
// read them; shared/reference/llm-d-gie.md §1.2), and their deprecated
// aliases, which llm-d still reads. ParseSLO reads them.
const (
	HeaderSLOTTFT      = "x-llm-d-slo-ttft-ms"
	HeaderSLOTPOT      = "x-llm-d-slo-tpot-ms"
	HeaderSLOTTFTAlias = "x-slo-ttft-ms"
	HeaderSLOTPOTAlias = "x-slo-tpot-ms"
)

// DefaultFlow is the flow of a request with neither a fairness id nor a
// tenant, as llm-d names it.
const DefaultFlow = "default-flow"

// The values of x-llm-d-request-dropped-reason (llm-d pkg/common/error).
const (
	DroppedSaturated    = "rejected-saturated"
	DroppedNoEndpoints  = "rejected-no-endpoints"
	DroppedTTLExpired   = "rejected-ttl-expired"
	DroppedShuttingDown = "rejected-shutting-down"
	DroppedEvicted      = "evicted-queue-pressure"
)
