package flow

// The request headers llm-d's flow control reads, and the response header
// it names a refusal in (shared/reference/llm-d-gie.md §1.2 and §3), in
// lower case as ext_proc carries them; fasthttp matches them in any case.
const (
	HeaderObjective  = "x-llm-d-inference-objective"
	HeaderFairnessID = "x-llm-d-inference-fairness-id"
	HeaderDropped    = "x-llm-d-request-dropped-reason"
	// HeaderSLOTTFT and HeaderSLOTPOT are a request's latency objective in
	// milliseconds (llm-d-router pkg/epp/metadata): its time to first token,
	// which slo-deadline-ordering-policy orders by, and its time per
	// output token.
	HeaderSLOTTFT = "x-llm-d-slo-ttft-ms"
	HeaderSLOTPOT = "x-llm-d-slo-tpot-ms"
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
