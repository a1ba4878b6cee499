package stress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/bench/loadgen"
	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/sim/engine"
)

// modelName is what every request asks for: the simulators' served name,
// so that the same body works direct and through the gateway.
const modelName = "inferrail/sim-8b"

const (
	completionsPath = "/v1/completions"
	chatPath        = "/v1/chat/completions"
	responsesPath   = "/v1/responses"
)

// replicaID names the i-th replica of a scenario's gateway.
func replicaID(i int) string { return "sim-" + strconv.Itoa(i) }

// startSims starts n in-process simulators on free loopback ports, with
// opt applied to the default options; they close when the scenario ends.
func (t *T) startSims(n int, opt func(*sim.Options)) ([]*sim.Server, error) {
	o := sim.DefaultOptions()
	o.Port = 0
	o.Model = modelName
	if opt != nil {
		opt(&o)
	}
	sims, err := sim.StartN(n, o)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		for _, s := range sims {
			s.Close()
		}
	})
	return sims, nil
}

func simURLs(sims []*sim.Server) []string {
	out := make([]string, len(sims))
	for i, s := range sims {
		out[i] = s.URL()
	}
	return out
}

// startChildSims starts n `inferrail sim` processes with args; they stop
// when the scenario ends.
func (t *T) startChildSims(n int, args ...string) ([]*loadgen.Proc, error) {
	if t.opts.SimBin == "" {
		return nil, errors.New("Options.SimBin is not set: this scenario runs simulators as child processes")
	}
	var procs []*loadgen.Proc
	for i := range n {
		p, err := loadgen.StartSim(t.ctx, t.opts.SimBin, append([]string{"--served-model-name", modelName}, args...)...)
		if err != nil {
			return procs, fmt.Errorf("simulator %d: %w", i, err)
		}
		p.Name = replicaID(i)
		procs = append(procs, p)
		t.Cleanup(func() {
			if err := p.Stop(); err != nil {
				t.Failf("simulator %s: %v", p.Name, err)
			}
		})
	}
	return procs, nil
}

// gateway is a running gateway with a client to its admin port.
type gateway struct {
	*Gateway
	admin *fasthttp.HostClient
	n     int // replicas
}

// stressConfig is the gateway config every scenario starts from: the
// defaults, ephemeral ports, a fixed routing seed, warnings logged, and one
// replica per URL (sim-0, sim-1, …) serving modelName (alias "sim").
func stressConfig(urls []string) *config.Config {
	cfg := config.Default()
	cfg.Server.Listen = "127.0.0.1:0"
	cfg.Server.AdminListen = "127.0.0.1:0"
	cfg.Server.ShutdownTimeout = 5 * time.Second
	cfg.Logging.Level = "warn"
	cfg.Routing.Seed = 1
	cfg.Models = []config.Model{config.NewModel(modelName, "sim")}
	for i, u := range urls {
		cfg.Replicas = append(cfg.Replicas, config.NewReplica(replicaID(i), u, modelName))
	}
	return cfg
}

// startGateway launches a gateway in front of urls, with mutate applied to
// stressConfig; it stops when the scenario ends.
func (t *T) startGateway(urls []string, mutate func(*config.Config)) (*gateway, error) {
	cfg := stressConfig(urls)
	if mutate != nil {
		mutate(cfg)
	}
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("gateway config: %w", err)
	}
	g, err := t.opts.Launch(t.ctx, cfg, t.log)
	if err != nil {
		return nil, fmt.Errorf("gateway: %w", err)
	}
	t.Cleanup(func() {
		if err := g.Stop(); err != nil {
			t.Failf("gateway shutdown: %v", err)
		}
	})
	gw := &gateway{Gateway: g, admin: t.client(g.AdminAddr, 8), n: len(urls)}
	return gw, nil
}

// replicaView is the part of one /admin/replicas entry the scenarios read.
type replicaView struct {
	ID       string `json:"id"`
	Healthy  bool   `json:"healthy"`
	Ejected  bool   `json:"ejected"`
	InFlight int    `json:"in_flight"`
	Pending  int    `json:"pending"`
	Engine   *struct {
		AgeMillis float64 `json:"age_ms"`
		Running   float64 `json:"running"`
	} `json:"engine"`
	PromptTokensChecked   uint64   `json:"prompt_tokens_checked"`
	PromptTokensAgreement *float64 `json:"prompt_tokens_agreement"`
	Warnings              []struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"warnings"`
}

// inRotation reports whether the replica can be picked.
func (r replicaView) inRotation() bool { return r.Healthy && !r.Ejected }

// replicas reads /admin/replicas.
func (g *gateway) replicas() ([]replicaView, error) {
	body, err := g.get("/admin/replicas")
	if err != nil {
		return nil, err
	}
	var v struct {
		Replicas []replicaView `json:"replicas"`
	}
	if err := json.Unmarshal(body, &v); err != nil {
		return nil, fmt.Errorf("/admin/replicas: %w", err)
	}
	return v.Replicas, nil
}

// metric is the sum of one metric's series on the gateway's /metrics page.
func (g *gateway) metric(name string) (float64, error) {
	page, err := g.get("/metrics")
	if err != nil {
		return 0, err
	}
	v, _ := loadgen.PromSum(page, name)
	return v, nil
}

func (g *gateway) get(path string) ([]byte, error) { return getPage(g.admin, path) }

// getPage GETs path from hc's address and returns the body of a 200.
func getPage(hc *fasthttp.HostClient, path string) ([]byte, error) {
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.SetRequestURI("http://" + hc.Addr + path)
	if err := hc.DoTimeout(req, resp, 5*time.Second); err != nil {
		return nil, fmt.Errorf("admin %s: %w", path, err)
	}
	if resp.StatusCode() != 200 {
		return nil, fmt.Errorf("admin %s: status %d", path, resp.StatusCode())
	}
	return append([]byte(nil), resp.Body()...), nil
}

// waitReplicas polls /admin/replicas every 10 ms until ok holds for its
// answer or timeout passes; it returns the last answer.
func (g *gateway) waitReplicas(ctx context.Context, timeout time.Duration, ok func([]replicaView) bool) ([]replicaView, error) {
	return g.waitReplicasEvery(ctx, 10*time.Millisecond, timeout, ok)
}

// waitReplicasEvery is waitReplicas polling every interval.
func (g *gateway) waitReplicasEvery(ctx context.Context, interval, timeout time.Duration, ok func([]replicaView) bool) ([]replicaView, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		rs, err := g.replicas()
		if err == nil && ok(rs) {
			return rs, nil
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("replicas not as wanted within %s: %+v", timeout, rs)
			}
			return rs, err
		}
	}
}

// idle reports whether no replica has a request in flight or pending.
func idle(rs []replicaView) bool {
	for _, r := range rs {
		if r.InFlight != 0 || r.Pending != 0 {
			return false
		}
	}
	return true
}

// engineStats reads each simulator's engine counters between two steps.
func engineStats(sims []*sim.Server) ([]engine.Stats, error) {
	out := make([]engine.Stats, len(sims))
	for i, s := range sims {
		if !s.Inspect(func(e *engine.Engine) { out[i] = e.Stats() }) {
			return nil, fmt.Errorf("simulator %d is not running", i)
		}
	}
	return out, nil
}
