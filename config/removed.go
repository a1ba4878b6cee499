package config

import (
	"fmt"
	"strings"
)

// removedKeys are keys the gateway once accepted and no longer has, each
// with what to do instead. A file or variable that still sets one is
// refused, as any unknown key is, with this hint beside the key's path.
// Paths write list entries as [], as in replicas[].engine.
var removedKeys = map[string]string{
	"flow_control.fair": "replaced by flow_control.fairness: round-robin-fairness-policy takes flows in turns, " +
		"a flow being the x-llm-d-inference-fairness-id header, else the tenant",
	"upstream.http2": "removed, it never took effect: the gateway reaches engines over HTTP/1.1 " +
		"keep-alive connections, which vLLM and SGLang serve (uvicorn); delete the key",
	"replicas[].engine": "removed, it never took effect: the engine, vllm or sglang, is recognized " +
		"by the metric prefix on its /metrics page; to say whose KV events the replica reads, set engine_type",
	"discovery.dns[].engine": "removed, it never took effect: the engine, vllm or sglang, is recognized " +
		"by the metric prefix on its /metrics page; to say whose KV events the members read, set engine_type",
}

// unknownKey is the error for path, a key the schema does not have: the
// removedKeys hint when it is one, wrapping ErrUnknownKey either way.
func unknownKey(path string) error {
	if hint, ok := removedKeys[schemaPath(path)]; ok {
		return fmt.Errorf("%w: %s", ErrUnknownKey, hint)
	}
	return ErrUnknownKey
}

// schemaPath writes path's list indexes as []: replicas[2].engine is
// replicas[].engine.
func schemaPath(path string) string {
	if !strings.Contains(path, "[") {
		return path
	}
	var b strings.Builder
	for {
		i := strings.IndexByte(path, '[')
		if i < 0 {
			b.WriteString(path)
			return b.String()
		}
		j := strings.IndexByte(path[i:], ']')
		if j < 0 {
			b.WriteString(path)
			return b.String()
		}
		b.WriteString(path[:i] + "[]")
		path = path[i+j+1:]
	}
}
