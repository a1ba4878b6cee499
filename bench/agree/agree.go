// Package agree measures several gateway instances in front of the same
// engines, in virtual time (sim/cluster with Config.Instances): for each
// workload, policy and instance count, with the engines' KV events and
// without, the hit rate against one instance's, the p99 TTFT and how often
// the instances would pick differently for the same request (issue 17).
//
// agree starts no goroutines of its own beyond Options.Jobs runs at once,
// does no I/O but writing the report the caller asks for, and keeps no
// globals.
package agree

import (
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/inferrail/inferrail/model/policy"
	"github.com/inferrail/inferrail/sim/cluster"
	"github.com/inferrail/inferrail/sim/engine"
	"github.com/inferrail/inferrail/sim/workload"
)

// Point is one workload at its rate.
type Point struct {
	Name     string
	Workload workload.Workload
	Rate     float64
}

// Variant is a routing policy as the matrix runs it.
type Variant struct {
	// Name labels its rows; Policy is the policy's config name.
	Name, Policy string
	// ColdRendezvous turns on cost_model's cold-prefix rendezvous
	// (routing.cold_rendezvous).
	ColdRendezvous bool
	// IgnoreShared routes as the gateway did before issue 32: no engine
	// found shared turns the rendezvous on
	// (routing.shared_engines_rendezvous off).
	IgnoreShared bool
}

// Variants are policies by their names, each of those also in rendezvous
// followed by itself with the cold-prefix rendezvous, labelled
// "NAME+cold_rendezvous" (cost_model is the one policy that has it).
func Variants(policies, rendezvous []string) []Variant {
	var out []Variant
	for _, p := range policies {
		out = append(out, Variant{Name: p, Policy: p})
		if slices.Contains(rendezvous, p) {
			out = append(out, Variant{Name: p + "+cold_rendezvous", Policy: p, ColdRendezvous: true})
		}
	}
	return out
}

// Options describe a matrix: every point × variant × instance count × KV
// events off and on, each repeated on Seeds seeds.
type Options struct {
	Points    []Point
	Variants  []Variant
	Instances []int // the first is the control, normally 1
	Replicas  int
	Engine    engine.Config
	Balance   cluster.Balance
	Duration  time.Duration
	WarmUp    time.Duration
	Seeds     []uint64
	// Jobs is how many runs go at once; below 1 takes 1.
	Jobs int
}

// Row is one cell of the matrix, over its seeds.
type Row struct {
	Point, Policy string
	Instances     int
	Events        bool
	// HitRate is the engines' hit rate over every seed's measured
	// requests; Ratio that over the control's (the first instance count)
	// for the same point, policy and events.
	HitRate, Ratio float64
	// Disagreement is cluster.Summary.Disagreement over the seeds, Exact
	// the share of predictions the engines matched.
	Disagreement, Exact float64
	// P99TTFT is the worst seed's.
	P99TTFT  time.Duration
	Requests int
}

// Run makes every run of o and returns its rows, in the order of the
// points, variants, events (off, then on) and instance counts.
func Run(o Options) ([]Row, error) {
	type cell struct {
		pt     int
		policy Variant
		events bool
		n      int
	}
	var cells []cell
	for pi := range o.Points {
		for _, pol := range o.Variants {
			for _, ev := range []bool{false, true} {
				for _, n := range o.Instances {
					cells = append(cells, cell{pi, pol, ev, n})
				}
			}
		}
	}
	type job struct{ c, s int }
	results := make([][]cluster.Summary, len(cells))
	for i := range results {
		results[i] = make([]cluster.Summary, len(o.Seeds))
	}
	jobs := make(chan job)
	var mu sync.Mutex
	var errs []error
	var wg sync.WaitGroup
	for range max(o.Jobs, 1) {
		wg.Go(func() {
			for j := range jobs {
				c := cells[j.c]
				p := o.Points[c.pt]
				cm := policy.DefaultCostModelParams()
				cm.ColdRendezvous, cm.ColdWhenShared = c.policy.ColdRendezvous, !c.policy.IgnoreShared
				res, err := cluster.Run(cluster.Config{
					Replicas: o.Replicas, Engine: o.Engine, Policy: c.policy.Policy, CostModel: &cm, KVEvents: c.events,
					Instances: c.n, Balance: o.Balance, Fanout: 16,
					Workload: p.Workload, Rate: p.Rate, Duration: o.Duration, WarmUp: o.WarmUp, Seed: o.Seeds[j.s],
				})
				mu.Lock()
				if err != nil {
					errs = append(errs, err)
				} else {
					results[j.c][j.s] = res.Summary
				}
				mu.Unlock()
			}
		})
	}
	for c := range cells {
		for s := range o.Seeds {
			jobs <- job{c, s}
		}
	}
	close(jobs)
	wg.Wait()
	if len(errs) > 0 {
		return nil, errs[0]
	}
	rows := make([]Row, len(cells))
	for i, c := range cells {
		r := Row{Point: o.Points[c.pt].Name, Policy: c.policy.Name, Instances: c.n, Events: c.events}
		var prompt, cached int64
		var exact, disagree float64
		for _, s := range results[i] {
			prompt += s.PromptTokens
			cached += s.CachedTokens
			exact += s.Accuracy * float64(s.Requests-s.Rejected)
			disagree += s.Disagreement * float64(s.Requests-s.Rejected)
			r.Requests += s.Requests - s.Rejected
			r.P99TTFT = max(r.P99TTFT, s.P99TTFT)
		}
		if prompt > 0 {
			r.HitRate = float64(cached) / float64(prompt)
		}
		if r.Requests > 0 {
			r.Exact = exact / float64(r.Requests)
			r.Disagreement = disagree / float64(r.Requests)
		}
		rows[i] = r
	}
	// The control is the first instance count of the same point, policy
	// and events, which comes first among them.
	for i := range rows {
		ctl := i - indexOf(o.Instances, rows[i].Instances)
		if rows[ctl].HitRate > 0 {
			rows[i].Ratio = rows[i].HitRate / rows[ctl].HitRate
		}
	}
	return rows, nil
}

func indexOf(xs []int, x int) int {
	for i, v := range xs {
		if v == x {
			return i
		}
	}
	panic("BUG: agree: instance count not in the matrix")
}

// Write writes rows as a Markdown table.
func Write(w io.Writer, rows []Row) error {
	if _, err := fmt.Fprintln(w, "| point | policy | KV events | instances | hit rate | × one instance | pick disagreement | exact predictions | p99 TTFT | requests |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|"); err != nil {
		return err
	}
	for _, r := range rows {
		ev := "off"
		if r.Events {
			ev = "on"
		}
		if _, err := fmt.Fprintf(w, "| %s | %s | %s | %d | %.3f | %.3f | %.3f | %.3f | %v | %d |\n",
			r.Point, r.Policy, ev, r.Instances, r.HitRate, r.Ratio, r.Disagreement, r.Exact,
			r.P99TTFT.Round(time.Millisecond), r.Requests); err != nil {
			return err
		}
	}
	return nil
}

// Points are issue 17's workloads on three engines: W1's shared prompts
// (32 of them), W2's conversations, W3's agent loops at the kv-events
// sweep's main rates (bench/sweeps/kv-events.toml), and hot at a third of
// its rate on eight replicas.
func Points() ([]Point, error) {
	var pts []Point
	for _, p := range []struct {
		name string
		rate float64
	}{{"W1", 2.5}, {"W2", 7}, {"W3", 7}, {"hot", 15}} {
		w, err := workload.New(p.name)
		if err != nil {
			return nil, err
		}
		if s, ok := w.(*workload.Shared); ok && p.name == "W1" {
			s.Prompts = 32
		}
		pts = append(pts, Point{Name: p.name, Workload: w, Rate: p.rate})
	}
	return pts, nil
}

// FaultRow is one fault run: two instances with KV events, one fault at
// At (issue 17's fault runs).
type FaultRow struct {
	Point, Fault string
	At, For      time.Duration
	// Lost counts the requests a killed instance had in flight.
	Lost int
	// Before, During, Back and After summarize the requests arriving in
	// the 20 s before the fault, while it lasts (after its first second,
	// for a withholding), in the first second after it, and later.
	Before, During, Back, After cluster.Summary
}

// Faults runs, for each point, cost_model on two instances with KV events:
// instance 1 killed at 60 s, and every engine's events withheld for 5 s
// from 60 s; each run lasts 120 s.
func Faults(o Options) ([]FaultRow, error) {
	const at, d, dur = 60 * time.Second, 5 * time.Second, 120 * time.Second
	var rows []FaultRow
	for _, p := range o.Points {
		for _, f := range []struct {
			name string
			f    cluster.Faults
			end  time.Duration
		}{
			{"instance killed", cluster.Faults{KillAt: at, KillInstance: 1}, at},
			{"events withheld", cluster.Faults{WithholdFrom: at, WithholdFor: d}, at + d},
		} {
			res, err := cluster.Run(cluster.Config{Replicas: o.Replicas, Engine: o.Engine, Policy: "cost_model", KVEvents: true,
				Instances: 2, Balance: o.Balance, Fanout: 16, Faults: f.f,
				Workload: p.Workload, Rate: p.Rate, Duration: dur, Seed: o.Seeds[0]})
			if err != nil {
				return nil, err
			}
			in := func(lo, hi time.Duration) cluster.Summary {
				return res.Summarize(func(r *cluster.Record) bool { return r.Arrival >= lo && r.Arrival < hi })
			}
			row := FaultRow{Point: p.Name, Fault: f.name, At: at, For: f.end - at,
				Before: in(at-20*time.Second, at), Back: in(f.end, f.end+time.Second), After: in(f.end+time.Second, dur)}
			if f.end > at {
				row.During = in(at+time.Second, f.end)
			}
			row.Lost = res.Summary.Lost
			rows = append(rows, row)
		}
	}
	return rows, nil
}

// WriteFaults writes fault rows as a Markdown table.
func WriteFaults(w io.Writer, rows []FaultRow) error {
	if _, err := fmt.Fprintln(w, "| point | fault | at | for | lost | hit before | hit after | exact before | exact during | exact first second after (requests) | exact after | p99 TTFT after |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"); err != nil {
		return err
	}
	for _, r := range rows {
		during := "–"
		if r.For > 0 {
			during = fmt.Sprintf("%.3f", r.During.Accuracy)
		}
		if _, err := fmt.Fprintf(w, "| %s | %s | %v | %v | %d | %.3f | %.3f | %.3f | %s | %.3f (%d) | %.3f | %v |\n",
			r.Point, r.Fault, r.At, r.For, r.Lost, r.Before.HitRate, r.After.HitRate, r.Before.Accuracy, during,
			r.Back.Accuracy, r.Back.Requests, r.After.Accuracy, r.After.P99TTFT.Round(time.Millisecond)); err != nil {
			return err
		}
	}
	return nil
}
