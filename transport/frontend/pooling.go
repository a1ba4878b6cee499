package frontend

import "strings"

// The pooling APIs vLLM serves (vllm/entrypoints/pooling/: embed, pooling,
// classify, score, rerank): a prompt is read once and nothing is
// generated, so the request is routed on load alone, with no cache
// prediction (no tokenizing, no block hashes), and proxied as it came.
var poolingPaths = []string{
	"/v1/embeddings",
	"/pooling",
	"/classify",
	"/score",
	"/v1/score",
	"/rerank",
	"/v1/rerank",
	"/v2/rerank",
}

// poolingPath reports whether path ends in one of poolingPaths.
func poolingPath[T ~string | ~[]byte](path T) bool {
	for _, p := range poolingPaths {
		if strings.HasSuffix(string(path), p) {
			return true
		}
	}
	return false
}
