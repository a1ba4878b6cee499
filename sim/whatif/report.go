package whatif

import (
	"cmp"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/inferrail/inferrail/sim/resume"
)

// Report is a sweep's answer. It is a value the caller owns; Write renders
// it.
type Report struct {
	// Workload names the traffic in the charts, Input describes it (a
	// trace's file, window and sampling); Rate is its own rate and Requests
	// the requests of each point.
	Workload string  `json:"workload"`
	Input    string  `json:"input"`
	Rate     float64 `json:"rate"`
	Requests int     `json:"requests"`
	// WarmUpSeconds is the warm-up left out of the measures.
	WarmUpSeconds float64 `json:"warmup_s,omitempty"`
	Engine        Engine  `json:"engine"`
	// SLO in seconds.
	SLOTTFT float64 `json:"slo_ttft_p99_s"`
	SLOTPOT float64 `json:"slo_tpot_p99_s"`

	Routes   []string  `json:"policies"`
	Replicas []int     `json:"replicas"`
	Scales   []float64 `json:"scales"`
	// Searched reports that replica counts were searched (bisection and
	// the knee's points) rather than all run.
	Searched bool `json:"searched"`

	// Fewest is, per policy and scale, the fewest replicas meeting the SLO.
	Fewest []Fewest `json:"fewest"`
	// Points are the points run or resumed, by policy, scale and replicas.
	Points []Result `json:"points"`

	// FoundRate is set when the rate was found by FindRate.
	FoundRate *FoundRate `json:"found_rate,omitempty"`
	// Fidelity is set when the input is a request log with measured TTFTs.
	Fidelity *Fidelity `json:"fidelity,omitempty"`

	// Ran and Resumed count the points simulated and read back;
	// WallSeconds is the sweep's wall time.
	Ran         int     `json:"ran"`
	Resumed     int     `json:"resumed"`
	WallSeconds float64 `json:"wall_seconds"`
}

// Fewest is one policy's answer at one load.
type Fewest struct {
	Route string  `json:"policy"`
	Scale float64 `json:"scale"`
	Rate  float64 `json:"rate"`
	// Replicas is the fewest replica count that meets the SLO, 0 when none
	// of those swept does; GPUs is Replicas times the engine's GPUs.
	Replicas int `json:"replicas"`
	GPUs     int `json:"gpus"`
	// Misses lists the counts above Replicas that were run and missed the
	// SLO: where the tail is not monotone in the replicas (noise at the
	// SLO's edge), which the search assumes it is.
	Misses []int `json:"misses,omitempty"`
	// Saved is the GPUs saved against each baseline policy, by name;
	// absent when this policy or the baseline was not swept, or this one
	// met the SLO nowhere.
	Saved map[string]Saving `json:"saved,omitempty"`
}

// Saving is GPUs saved against a baseline: negative when the policy needs
// more. AtLeast reports that the baseline met the SLO at none of the counts
// swept, so it was counted at one more replica than the largest: a lower
// bound.
type Saving struct {
	GPUs    int  `json:"gpus"`
	AtLeast bool `json:"at_least,omitempty"`
}

// Baselines returns the policies savings are counted against.
func Baselines() []string { return baselines[:] }

func newReport(p *Plan, points []Result) *Report {
	rep := &Report{
		Workload: p.Workload.Name(), Input: cmp.Or(p.Input, p.Workload.Name()), Rate: p.Rate, Requests: p.Requests, Engine: p.Engine,
		WarmUpSeconds: p.WarmUp.Seconds(),
		SLOTTFT:       p.SLO.TTFT.Seconds(), SLOTPOT: p.SLO.TPOT.Seconds(),
		Replicas: slices.Sorted(slices.Values(p.Replicas)), Scales: p.Scales,
		Searched: !p.All, Points: points,
	}
	rep.Replicas = slices.Compact(rep.Replicas)
	for _, r := range p.Routes {
		rep.Routes = append(rep.Routes, r.Name)
	}
	rep.Fewest = FewestReplicas(points, rep.Routes, p.Scales, p.Engine.GPUs, rep.Replicas[len(rep.Replicas)-1])
	return rep
}

// FewestReplicas returns, for every route and scale, the fewest replica
// count among points that meets the SLO, and the GPUs that saves against
// the baselines (gpus per replica; a baseline that met it nowhere counts
// as largest + 1 replicas, a lower bound on the saving).
func FewestReplicas(points []Result, routes []string, scales []float64, gpus, largest int) []Fewest {
	fewest := func(route string, scale float64) int {
		best := 0
		for _, pt := range points {
			if pt.Route == route && pt.Scale == scale && pt.Meets && (best == 0 || pt.Replicas < best) {
				best = pt.Replicas
			}
		}
		return best
	}
	var out []Fewest
	for _, s := range scales {
		for _, r := range routes {
			n := fewest(r, s)
			f := Fewest{Route: r, Scale: s, Replicas: n, GPUs: n * gpus}
			for _, pt := range points {
				if pt.Scale == s && f.Rate == 0 {
					f.Rate = pt.Rate
				}
				if pt.Route == r && pt.Scale == s && n > 0 && pt.Replicas > n && !pt.Meets {
					f.Misses = append(f.Misses, pt.Replicas)
				}
			}
			slices.Sort(f.Misses)
			for _, b := range baselines {
				if n == 0 || !slices.Contains(routes, b) {
					continue
				}
				bn, atLeast := fewest(b, s), false
				if bn == 0 {
					bn, atLeast = largest+1, true
				}
				if f.Saved == nil {
					f.Saved = map[string]Saving{}
				}
				f.Saved[b] = Saving{GPUs: (bn - n) * gpus, AtLeast: atLeast}
			}
			out = append(out, f)
		}
	}
	return out
}

// Write writes the report into dir: report.md, report.json and the charts
// it shows (replicas.svg, and per scale knee-N.svg of p99 TTFT and
// tpot-N.svg of p99 TPOT against replicas).
func (rep *Report) Write(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := resume.Write(filepath.Join(dir, "report.json"), rep); err != nil {
		return err
	}
	files := map[string]string{"replicas.svg": rep.replicasChart()}
	for i := range rep.Scales {
		for k, m := range rep.metrics() {
			files[kneeFile(i, k)] = rep.kneeChart(i, m)
		}
	}
	var md strings.Builder
	rep.markdown(&md)
	files["report.md"] = md.String()
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// kneeFile names scale i's knee chart of metric k: knee-N.svg for TTFT,
// tpot-N.svg for TPOT.
func kneeFile(i, k int) string {
	return [...]string{"knee-", "tpot-"}[k] + strconv.Itoa(i+1) + ".svg"
}

// replicasText writes a fewest count: "–" when none met the SLO.
func (f *Fewest) replicasText(largest int) string {
	if f.Replicas == 0 {
		return "> " + strconv.Itoa(largest)
	}
	return strconv.Itoa(f.Replicas)
}

func (s Saving) String() string {
	if s.AtLeast {
		return "≥ " + strconv.Itoa(s.GPUs)
	}
	return strconv.Itoa(s.GPUs)
}

func ms(s float64) string { return strconv.FormatFloat(s*1000, 'f', 0, 64) }

func (rep *Report) largest() int { return rep.Replicas[len(rep.Replicas)-1] }

// savedText writes a fewest's saving against baseline, "–" when unknown.
func (f *Fewest) savedText(baseline string) string {
	if s, ok := f.Saved[baseline]; ok {
		return s.String()
	}
	return "–"
}

func (rep *Report) markdown(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("# What if: GPUs needed per routing policy\n\n")
	p("- Traffic: %s, %.4g req/s at scale 1, %d requests per point.\n", rep.Input, rep.Rate, rep.Requests)
	if rep.WarmUpSeconds > 0 {
		p("- The requests of each run's first %g s warm the caches and are left out of every measure.\n", rep.WarmUpSeconds)
	}
	p("- Engine: `%s`, %d GPU(s) per replica: %s.\n", rep.Engine.Name, rep.Engine.GPUs, rep.Engine.Source)
	l := rep.Engine.Config.Latency
	p("  Prefill a = %v/token, b = %.3g ns/pair, d = %v; decode %v + %v per further sequence; KV %d blocks of %d tokens; max-num-seqs %d, max-num-batched-tokens %d. cost_model is given the engine's true prefill.\n",
		l.PrefillToken, l.PrefillPair, l.PrefillFixed, l.DecodeToken, l.DecodeSeq, rep.Engine.Config.NumBlocks,
		rep.Engine.Config.BlockSize, rep.Engine.Config.MaxNumSeqs, rep.Engine.Config.MaxBatchedTokens)
	p("- SLO: a point **meets** it when its p99 TTFT ≤ %s ms, its p99 TPOT ≤ %s ms and no request was rejected. Attainment is the share of requests within both (goodput).\n",
		ms(rep.SLOTTFT), ms(rep.SLOTPOT))
	if rep.Searched {
		p("- Replica counts %v were searched by bisection per policy and scale, assuming more replicas never make the tail worse; the count below the answer and a few above were run for the knee chart, the rest skipped.\n", rep.Replicas)
	} else {
		p("- Every replica count of %v was run.\n", rep.Replicas)
	}
	p("- Virtual time, sim/cluster: the gateway's routing core over simulated vLLM engines; no network or tokenizer latency.\n")
	if f := rep.FoundRate; f != nil {
		p("- Rate: %.4g req/s is the highest at which %d `%s` replicas meet the SLO (%.4g failed; %d probes).\n",
			f.Rate, f.Replicas, f.Route, f.Fails, f.Probes)
	}
	p("\n## Fewest replicas meeting the SLO\n\n")
	p("| scale | rate (req/s) | policy | replicas | GPUs | GPUs saved vs round_robin | vs least_request |\n|---|---|---|---|---|---|---|\n")
	for i := range rep.Fewest {
		f := &rep.Fewest[i]
		gpus := "–"
		if f.Replicas > 0 {
			gpus = strconv.Itoa(f.GPUs)
		}
		p("| %g | %.4g | %s | %s | %s | %s | %s |\n", f.Scale, f.Rate, f.Route, f.replicasText(rep.largest()), gpus,
			f.savedText("round_robin"), f.savedText("least_request"))
	}
	for i := range rep.Fewest {
		if f := &rep.Fewest[i]; len(f.Misses) > 0 {
			p("\nNot monotone: `%s` at scale %g meets the SLO on %d replicas but misses it on %v, run for the knee chart; the answer is the fewest that met it, and the tail is noisy at the SLO's edge.\n",
				f.Route, f.Scale, f.Replicas, f.Misses)
		}
	}
	p("\n\"> N\": no count swept met the SLO. \"≥ G\": the baseline met it nowhere and is counted at one replica more than the largest swept.\n\n")
	p("![replicas needed](replicas.svg)\n\n")
	for i, s := range rep.Scales {
		p("![p99 TTFT against replicas at scale %g](%s)\n![p99 TPOT against replicas at scale %g](%s)\n\n", s, kneeFile(i, 0), s, kneeFile(i, 1))
	}
	if fd := rep.Fidelity; fd != nil {
		fd.markdown(w)
	}
	p("## Points\n\n")
	p("| policy | scale | replicas | meets | attainment | p50 TTFT ms | p99 TTFT ms | p50 TPOT ms | p99 TPOT ms | hit rate | ceiling | rejected |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, pt := range rep.Points {
		yes := "no"
		if pt.Meets {
			yes = "yes"
		}
		p("| %s | %g | %d | %s | %.4f | %s | %s | %s | %s | %.3f | %.3f | %d |\n", pt.Route, pt.Scale, pt.Replicas, yes,
			pt.Attainment, ms(pt.P50TTFT), ms(pt.P99TTFT), ms(pt.P50TPOT), ms(pt.P99TPOT), pt.HitRate, pt.OracleHitRate, pt.Rejected)
	}
	p("\nThe ceiling is the hit rate of an infinite cache with perfect placement on this traffic.\n")
	p("%d points simulated and %d resumed in %.0f s.\n", rep.Ran, rep.Resumed, rep.WallSeconds)
}

// Summary writes the answer in a few lines, for the terminal.
func (rep *Report) Summary(w io.Writer) {
	fmt.Fprintf(w, "%s on %s (%d GPU/replica), SLO p99 TTFT ≤ %s ms, p99 TPOT ≤ %s ms\n",
		rep.Input, rep.Engine.Name, rep.Engine.GPUs, ms(rep.SLOTTFT), ms(rep.SLOTPOT))
	if f := rep.FoundRate; f != nil {
		fmt.Fprintf(w, "rate %.4g req/s: the highest %d %s replicas sustain\n", f.Rate, f.Replicas, f.Route)
	}
	for i := range rep.Fewest {
		f := &rep.Fewest[i]
		fmt.Fprintf(w, "  scale %-4g %-20s %6s replicas  saved vs round_robin %5s, vs least_request %5s GPUs\n",
			f.Scale, f.Route, f.replicasText(rep.largest()), f.savedText("round_robin"), f.savedText("least_request"))
	}
	if fd := rep.Fidelity; fd != nil {
		fmt.Fprintf(w, "fidelity (%s on %d replicas): p50 TTFT %s ms logged, %s replayed; p99 %s, %s; hit rate %.3f, %.3f\n",
			fd.Policy, fd.Replicas, ms(fd.Logged.P50TTFT), ms(fd.Replayed.P50TTFT), ms(fd.Logged.P99TTFT),
			ms(fd.Replayed.P99TTFT), fd.Logged.HitRate, fd.Replayed.HitRate)
	}
	fmt.Fprintf(w, "%d points simulated, %d resumed, %.0f s\n", rep.Ran, rep.Resumed, rep.WallSeconds)
}
