package frontend

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/transport/auth"
)

// BenchmarkAuth: one request at a time through a gateway to a zero-latency
// simulator, without API keys, with 1,000 of them (the request's sent as
// Bearer), and with an engine key put in place of the client's as well.
// The difference between the cases is what auth adds to a request;
// transport/auth's BenchmarkClient measures the check alone.
func BenchmarkAuth(b *testing.B) {
	keys := make([]config.APIKey, 1000)
	for i := range keys {
		keys[i] = config.APIKey{ID: fmt.Sprintf("k%d", i), SHA256: config.HashKey(fmt.Sprintf("sk-bench-%032d", i))}
	}
	engineFile := filepath.Join(b.TempDir(), "engine-key")
	os.WriteFile(engineFile, []byte("engine-bench-key"), 0o600)
	for _, bc := range []struct {
		name         string
		keys, engine bool
	}{{"off", false, false}, {"keys", true, false}, {"keys+engine_key", true, true}} {
		b.Run(bc.name, func(b *testing.B) {
			so := sim.DefaultOptions()
			so.Engine.Latency.Zero = true
			if bc.engine {
				so.APIKey = "engine-bench-key"
			}
			sims, err := sim.StartN(1, so)
			if err != nil {
				b.Fatal(err)
			}
			b.Cleanup(func() { sims[0].Close() })
			g := startOpts(b, []string{sims[0].URL()}, func(c *config.Config) {
				if bc.keys {
					c.Auth.APIKeys.Keys = keys
				}
				if bc.engine {
					c.Upstream.APIKeyFile = engineFile
				}
			}, func(o *Options) {
				if !bc.keys {
					return
				}
				var err error
				if o.Auth, err = auth.New(o.Config, auth.Options{}); err != nil {
					b.Fatal(err)
				}
			})
			c := &fasthttp.Client{}
			defer c.CloseIdleConnections()
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			defer fasthttp.ReleaseRequest(req)
			defer fasthttp.ReleaseResponse(resp)
			req.SetRequestURI(g.url("/v1/completions"))
			req.Header.SetMethod("POST")
			req.Header.SetContentType("application/json")
			req.Header.Set("Authorization", "Bearer sk-bench-00000000000000000000000000000500")
			req.SetBodyString(`{"prompt":"hi","max_tokens":1}`)
			b.ReportAllocs()
			b.ResetTimer()
			for b.Loop() {
				if err := c.Do(req, resp); err != nil || resp.StatusCode() != 200 {
					b.Fatalf("%v %d %s", err, resp.StatusCode(), resp.Body())
				}
			}
		})
	}
}
