package auth

import (
	"fmt"
	"strings"
	"testing"

	"github.com/VictoriaMetrics/metrics"

	"github.com/inferrail/inferrail/config"
)

// Sink keeps benchmark results alive.
var Sink *Identity

// BenchmarkClient is what an API key check adds to a request: header
// lookup, SHA-256 and the hash lookup, among 1,000 keys.
func BenchmarkClient(b *testing.B) {
	var doc strings.Builder
	doc.WriteString("keys:\n")
	for i := range 1000 {
		fmt.Fprintf(&doc, "  - {id: k%d, key: sk-bench-%032d}\n", i, i)
	}
	c := config.Default()
	c.Models = []config.Model{config.NewModel("m")}
	c.Replicas = []config.Replica{config.NewReplica("r0", "http://127.0.0.1:1", "m")}
	keys, err := config.ParseAPIKeys([]byte(doc.String()), nil)
	if err != nil {
		b.Fatal(err)
	}
	c.Auth.APIKeys.Keys = keys
	g, err := New(c, Options{Metrics: metrics.NewSet()})
	if err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct{ name, line string }{
		{"bearer", "Authorization: Bearer sk-bench-00000000000000000000000000000500"},
		{"x-api-key", "X-Api-Key: sk-bench-00000000000000000000000000000500"},
		{"wrong", "Authorization: Bearer sk-bench-00000000000000000000000000009999"},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			path := []byte("/v1/chat/completions")
			b.RunParallel(func(pb *testing.PB) {
				h := header(b, "/v1/chat/completions", "Content-Type: application/json", bc.line, "User-Agent: OpenAI/JS 4.0")
				var id *Identity
				for pb.Next() {
					id, _ = g.Client(h, path)
					id.CountRequest()
				}
				Sink = id
			})
		})
	}
}
