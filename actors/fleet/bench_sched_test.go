package fleet

import (
	"math/rand/v2"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
	"go.yaml.in/yaml/v3"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/model/sched"
)

// schedContenders are the deciders BenchmarkSchedActor compares, each the
// policy of one model of the same fleet: today's cost_model (model/policy),
// cost_model's built-in profile (sched.New, the scheduling pipeline) and
// llm-d's Helm default profile (model/sched/testdata/helm-default.yaml).
var schedContenders = []string{"policy", "profile", "helm"}

// helmDefault parses llm-d's Helm default profile as llm-d ships it.
func helmDefault(b *testing.B) *sched.Config {
	b.Helper()
	raw, err := os.ReadFile("../../model/sched/testdata/helm-default.yaml")
	if err != nil {
		b.Fatal(err)
	}
	var doc any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		b.Fatal(err)
	}
	c, _, err := sched.Parse("llmd-helm-default", doc)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkSchedActor is BenchmarkCostModelActor's decision (an
// 8,000-token prompt through Fleet.Pick, the estimate broadcast and gather,
// the decider and the lease) made by each of schedContenders in turn on
// one fleet: three models served by the same replica actors, each routed
// by one contender, every iteration one decision of each in a random order
// (seeded), so that each goes first, second and last, and after each of
// the others, as often: a decision finds the replica actors busy with what
// the one before it sent them. It
// reports each one's p50, p99 and max, and the profile's p99 over the
// policy's (ns/op is the three decisions together).
func BenchmarkSchedActor(b *testing.B) {
	helm := helmDefault(b)
	byFanout(b, func(b *testing.B, n, fanout int) { benchSchedActor(b, n, fanout, helm) })
}

func benchSchedActor(b *testing.B, n, fanout int, helm *sched.Config) {
	models := []string{"m", "m-profile", "m-helm"}
	cfg := testConfig(n, func(c *config.Config) {
		c.Models = []config.Model{{Name: models[0], BlockSize: 16, Policy: "cost_model"},
			{Name: models[1], BlockSize: 16, Policy: "cost_model"}, {Name: models[2], BlockSize: 16, Policy: "cost_model"}}
		for i := range c.Replicas {
			c.Replicas[i].Models = models
		}
		c.Routing.EstimateFanout = fanout
	})
	// Every model is configured with cost_model, so each broadcasts
	// estimates; the profiles replace its policy.
	built := map[string]bool{}
	build := func(cfg *config.Config, m *config.Model, name string) (policy.Policy, error) {
		built[m.Name] = true
		spec := modelSpec(cfg, m)
		spec.Name = name
		switch m.Name {
		case models[1]:
			return sched.New(spec)
		case models[2]:
			return helm.Build()
		}
		// Today's cost_model: model/policy's own implementation, which the
		// built-in profile is checked against.
		return spec.Build()
	}
	set := metrics.NewSet()
	f := start(b, cfg, Options{Logger: discard(), RoutingMetrics: set, ArmPolicy: build})
	if len(built) != len(models) {
		b.Fatalf("the fleet built the policies of %v, want each of %v", built, models)
	}
	req := fillIndexes(b, f, n)
	deadline := cfg.Routing.EstimateDeadline
	lat := make([][]time.Duration, len(models))
	late := make([]int, len(models))
	misses := make([]*metrics.Counter, len(models))
	m0 := make([]uint64, len(models))
	for k, m := range models {
		lat[k] = make([]time.Duration, 0, b.N)
		misses[k] = set.GetOrCreateCounter(`inferrail_estimate_deadline_misses_total{model="` + m + `"}`)
		m0[k] = misses[k].Get()
	}
	order := [...]int{0, 1, 2}
	rng := rand.New(rand.NewPCG(uint64(n), uint64(fanout)))
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		rng.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
		for _, k := range order {
			t0 := time.Now()
			d, err := f.Pick(PickRequest{Model: models[k], Policy: req, Deadline: t0.Add(time.Second)})
			el := time.Since(t0)
			if err != nil {
				b.Fatal(err)
			}
			lat[k] = append(lat[k], el)
			if el > deadline {
				late[k]++
			}
			f.FirstByte(d)
			f.Done(d, OutcomeOK)
			Sink = d.Replica
		}
	}
	b.StopTimer()
	p99 := make([]float64, len(models))
	for k, c := range schedContenders {
		l := lat[k]
		slices.Sort(l)
		q := func(p float64) float64 { return float64(l[int(p*float64(len(l)-1))].Nanoseconds()) }
		p99[k] = q(0.99)
		b.ReportMetric(q(0.50), c+"-p50-ns")
		b.ReportMetric(p99[k], c+"-p99-ns")
		b.ReportMetric(float64(l[len(l)-1].Nanoseconds()), c+"-max-ns")
		b.ReportMetric(100*float64(late[k])/float64(b.N), c+"-late-%")
		b.ReportMetric(float64(misses[k].Get()-m0[k])/float64(b.N), c+"-misses/op")
	}
	b.ReportMetric(p99[1]/p99[0], "profile/policy-p99")
	b.ReportMetric(p99[2]/p99[0], "helm/policy-p99")
}
