package sweep

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/inferrail/inferrail/bench/harness"
	"github.com/inferrail/inferrail/sim/cluster"
)

// Targets of the capacity comparison (issue 31's).
const (
	// cost_model's capacity over the best llm-d composition's, on every
	// workload; never below capFloor.
	capTarget = 1.15
	capFloor  = 1.0
	// cost_model's median p99 TTFT over the best peer's, in at least
	// ttftShare of the cells, never above ttftCeiling.
	ttftTarget  = 0.85
	ttftShare   = 0.8
	ttftCeiling = 1.05
	// cost_model's hit rate within hitGap of the best peer's in every
	// cell.
	hitGap = 0.01
	// llmdPrefix starts the name of every llm-d composition compared.
	llmdPrefix = "llmd-"
)

// capGroup is one capacity sweep's results.
type capGroup struct {
	sweep, mode string
	spec        *RunSpec // one run's, for the shared settings
	search      *Search
	seeds       []uint64
	points      []*capPoint
	files       int
}

type capKey struct {
	policy string
	rep    int
}

// capPoint is one point's searches and knee runs.
type capPoint struct {
	name       string
	order      int
	spec       *RunSpec
	contenders []string
	reps       []int
	probes     map[capKey][]*Result
	scales     []float64
	scaled     map[float64]map[string][]*Result
}

// found is one search read back from its probes: the highest rate that
// met (0 for none) and the lowest that failed (0 for none); ok when the
// search closed its bracket to its precision.
type found struct {
	meets, fails float64
	ok           bool
}

func (p *capPoint) found(s *Search, policy string, rep int) found {
	var f found
	for _, r := range p.probes[capKey{policy, rep}] {
		if s.meets(r) {
			f.meets = max(f.meets, r.Spec.Rate)
		} else if f.fails == 0 || r.Spec.Rate < f.fails {
			f.fails = r.Spec.Rate
		}
	}
	f.ok = f.meets > 0 && f.fails > f.meets && f.fails/f.meets <= 1+s.rate().Precision()*(1+1e-9)
	return f
}

// capacity is policy's capacity on every repetition whose search closed.
func (p *capPoint) capacity(s *Search, policy string) []float64 {
	var out []float64
	for _, rep := range p.reps {
		if f := p.found(s, policy, rep); f.ok {
			out = append(out, f.meets)
		}
	}
	return out
}

// knee is the knee (kneeOf) of the searches read back, and how many
// repetitions counted.
func (p *capPoint) knee(s *Search) (float64, int) {
	return kneeOf(len(p.reps), s.Blind, func(i int, pol string) (float64, bool) {
		f := p.found(s, pol, p.reps[i])
		return f.meets, f.ok
	})
}

// kneeRun is the knee the runs at scale x used.
func (p *capPoint) kneeRun(x float64) float64 {
	for _, rs := range p.scaled[x] {
		for _, r := range rs {
			return r.Spec.Rate / x
		}
	}
	return math.NaN()
}

// CapacityReport builds the Markdown report of a capacity comparison's
// result files (ExecuteCapacity), by file name ("report.md"): every
// contender's capacity, the knee, the latencies and hit rates at the
// knee's multiples, and issue 31's checks. It reads nothing but results,
// in any order; the same results always give the same bytes. Results of
// plain sweeps are left out.
func CapacityReport(results []*Result) (map[string][]byte, error) {
	groups := capGroups(results)
	if len(groups) == 0 {
		return nil, fmt.Errorf("capacity report: no capacity results among %d", len(results))
	}
	var b strings.Builder
	b.WriteString("# Capacity report\n\n")
	fmt.Fprintf(&b, "Built by `inferrail bench capacity` from result files alone. A contender's **capacity** on a seed is "+
		"the highest rate at which at least %s of the measured requests are within the SLO (TTFT and TPOT; a "+
		"rejected request is not), found by bisection in virtual time; reported as the median over seeds with the "+
		"seeds' range. The **knee** is the median over seeds of the best cache-blind policy's capacity. Latencies "+
		"and hit rates are medians over seeds at multiples of the knee, with their range.\n", pct(groups[0].search.Share))
	for _, g := range groups {
		writeCapGroup(&b, g)
	}
	return map[string][]byte{"report.md": []byte(b.String())}, nil
}

func capGroups(results []*Result) []*capGroup {
	byKey := map[[2]string]*capGroup{}
	for _, r := range results {
		s := &r.Spec
		if s.Search == nil {
			continue
		}
		k := [2]string{s.Mode, s.Sweep}
		g := byKey[k]
		if g == nil {
			g = &capGroup{sweep: s.Sweep, mode: s.Mode, spec: s, search: s.Search}
			byKey[k] = g
		}
		g.files++
		if first(s, g.spec) {
			g.spec, g.search = s, s.Search
		}
		if !slices.Contains(g.seeds, s.Seed) {
			g.seeds = append(g.seeds, s.Seed)
		}
		i := slices.IndexFunc(g.points, func(p *capPoint) bool { return p.name == s.Point })
		if i < 0 {
			g.points = append(g.points, &capPoint{name: s.Point, order: s.Order, spec: s,
				probes: map[capKey][]*Result{}, scaled: map[float64]map[string][]*Result{}})
			i = len(g.points) - 1
		}
		p := g.points[i]
		if !slices.Contains(p.contenders, s.Policy) {
			p.contenders = append(p.contenders, s.Policy)
		}
		if !slices.Contains(p.reps, s.Repetition) {
			p.reps = append(p.reps, s.Repetition)
		}
		if s.Scale > 0 {
			if p.scaled[s.Scale] == nil {
				p.scaled[s.Scale] = map[string][]*Result{}
				p.scales = append(p.scales, s.Scale)
			}
			p.scaled[s.Scale][s.Policy] = append(p.scaled[s.Scale][s.Policy], r)
			continue
		}
		k2 := capKey{s.Policy, s.Repetition}
		p.probes[k2] = append(p.probes[k2], r)
	}
	out := make([]*capGroup, 0, len(byKey))
	for _, g := range byKey {
		slices.Sort(g.seeds)
		byPlace(g.points, func(p *capPoint) (int, string) { return p.order, p.name })
		for _, p := range g.points {
			sortPolicies(p.contenders)
			slices.Sort(p.reps)
			slices.Sort(p.scales)
			for _, m := range p.scaled {
				for _, rs := range m {
					sort.Slice(rs, func(i, j int) bool { return rs[i].Spec.Repetition < rs[j].Spec.Repetition })
				}
			}
		}
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].sweep != out[j].sweep {
			return out[i].sweep < out[j].sweep
		}
		return out[i].mode > out[j].mode
	})
	return out
}

// medRange is a median with the range of xs: "2.50 (2.25–2.75)"; f
// formats each figure.
func medRange(xs []float64, f func(float64) string) string {
	if len(xs) == 0 {
		return "–"
	}
	return f(medianOf(xs)) + " (" + f(slices.Min(xs)) + "–" + f(slices.Max(xs)) + ")"
}

// rate formats a rate in requests per second.
func rate(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}

// values are f of each of a cell's results.
func values(rs []*Result, f func(*harness.Summary) float64) []float64 {
	var out []float64
	for _, r := range rs {
		out = append(out, f(&r.Summary))
	}
	return out
}

func p99TTFT(s *harness.Summary) float64   { return s.TTFT.P99 }
func p99TPOT(s *harness.Summary) float64   { return s.TPOT.P99 }
func hitRate(s *harness.Summary) float64   { return s.HitRate }
func goodShare(s *harness.Summary) float64 { return s.GoodShare }

func writeCapGroup(b *strings.Builder, g *capGroup) {
	s, se := g.spec, g.search
	fmt.Fprintf(b, "\n## Sweep %q in %s time\n\n", g.sweep, g.mode)
	seeds := make([]string, len(g.seeds))
	for i, x := range g.seeds {
		seeds[i] = strconv.FormatUint(x, 10)
	}
	fmt.Fprintf(b, "%d result files: %d points, each on %d simulated engines (block size %d, %d KV blocks, %d tokens per step) "+
		"with %v of requests per run and the first %v left out unless the point says otherwise, seeds %s, SLO TTFT ≤ %v "+
		"and TPOT ≤ %v unless the point says otherwise. Each search starts at the point's main rate, multiplies or divides it "+
		"by %s up to %d times until one rate is sustained and one is not, then bisects %d times: a capacity is within "+
		"%s of the true threshold of its seed. Cache-blind policies for the knee: %s.\n",
		g.files, len(g.points), s.Replicas, s.Engine.BlockSize, s.Engine.NumBlocks, s.Engine.MaxBatchedTokens,
		s.Duration, s.WarmUp, strings.Join(seeds, ", "), s.SLO.TTFT, s.SLO.TPOT,
		num(se.Grow), se.Bracket, se.Steps, pct(se.rate().Precision()), strings.Join(se.Blind, ", "))
	writeCapChecks(b, g)
	writeCapTable(b, g)
	for _, p := range g.points {
		writeCapPoint(b, g, p)
	}
}

// medianCap is policy's median capacity on p, NaN without one.
func (g *capGroup) medianCap(p *capPoint, policy string) float64 {
	return medianOf(p.capacity(g.search, policy))
}

// bestOf is the contender among names with the highest median capacity
// on p, "" for none.
func (g *capGroup) bestOf(p *capPoint, keep func(string) bool) (string, float64) {
	best, v := "", math.NaN()
	for _, c := range p.contenders {
		if !keep(c) {
			continue
		}
		if x := g.medianCap(p, c); !math.IsNaN(x) && (best == "" || x > v) {
			best, v = c, x
		}
	}
	return best, v
}

func peer(c string) bool { return c != ours && c != cluster.Informed }

func writeCapChecks(b *strings.Builder, g *capGroup) {
	b.WriteString("\n### Checks\n\n")
	// Capacity against the best llm-d composition.
	var parts []string
	measured, allTarget, allFloor := 0, true, true
	for _, p := range g.points {
		cm := g.medianCap(p, ours)
		l, lv := g.bestOf(p, func(c string) bool { return strings.HasPrefix(c, llmdPrefix) })
		if math.IsNaN(cm) || l == "" {
			parts = append(parts, p.name+" not measured")
			allTarget = false
			continue
		}
		measured++
		r := cm / lv
		allTarget = allTarget && r >= capTarget
		allFloor = allFloor && r >= capFloor
		parts = append(parts, fmt.Sprintf("%s %s× (%s against %s's %s req/s)", p.name, f2(r), rate(cm), l, rate(lv)))
	}
	verdict := "not measured"
	if measured > 0 {
		verdict = metOr(allTarget && allFloor)
		if !allTarget && allFloor {
			verdict = "not met (never below 1.0×)"
		}
	}
	fmt.Fprintf(b, "- **Capacity**, cost_model's median over the best llm-d composition's: %s. Target ≥ %s× on every workload "+
		"and never below %s×: **%s**.\n", strings.Join(parts, "; "), num(capTarget), f2(capFloor), verdict)

	// p99 TTFT and hit rate per cell.
	cells, under, gapOK := 0, 0, 0
	var over, gaps, ratios []string
	for _, p := range g.points {
		for _, x := range p.scales {
			m := p.scaled[x]
			cm := m[ours]
			if cm == nil {
				continue
			}
			bestT, bestTN, bestH, bestHN := math.NaN(), "", math.NaN(), ""
			for _, c := range p.contenders {
				if !peer(c) || m[c] == nil {
					continue
				}
				if t := medianOf(values(m[c], p99TTFT)); bestTN == "" || t < bestT {
					bestT, bestTN = t, c
				}
				if h := medianOf(values(m[c], hitRate)); bestHN == "" || h > bestH {
					bestH, bestHN = h, c
				}
			}
			if bestTN == "" {
				continue
			}
			cells++
			cell := fmt.Sprintf("%s %s×", p.name, num(x))
			t := medianOf(values(cm, p99TTFT))
			r := t / bestT
			ratios = append(ratios, fmt.Sprintf("%s %s", cell, f2(r)))
			if r <= ttftTarget {
				under++
			}
			if r > ttftCeiling {
				over = append(over, fmt.Sprintf("%s %s× (%s ms against %s's %s ms)", cell, f2(r), ms(t), bestTN, ms(bestT)))
			}
			h := medianOf(values(cm, hitRate))
			if gap := max(bestH, h) - h; gap <= hitGap {
				gapOK++
			} else {
				gaps = append(gaps, fmt.Sprintf("%s %s points (%s against %s's %s)", cell, strconv.FormatFloat(gap*100, 'f', 1, 64), f3(h), bestHN, f3(bestH)))
			}
		}
	}
	if cells == 0 {
		b.WriteString("- **p99 TTFT** and **hit rate** per cell: not measured.\n")
		return
	}
	share := float64(under) / float64(cells)
	fmt.Fprintf(b, "- **p99 TTFT**, cost_model's median over the best peer's (the lowest other median but the informed bound's) "+
		"per cell: %s. At most %s× in %d of %d cells (%s); above %s× in %d", strings.Join(ratios, ", "), num(ttftTarget), under, cells,
		pct(share), num(ttftCeiling), len(over))
	if len(over) > 0 {
		fmt.Fprintf(b, ": %s", strings.Join(over, "; "))
	}
	fmt.Fprintf(b, ". Target ≤ %s× in at least %.0f%% of cells and never above %s×: **%s**.\n", num(ttftTarget), ttftShare*100,
		num(ttftCeiling), metOr(share >= ttftShare && len(over) == 0))
	fmt.Fprintf(b, "- **Hit rate** within %s point of the best peer's in %d of %d cells", num(hitGap*100), gapOK, cells)
	if len(gaps) > 0 {
		fmt.Fprintf(b, "; short by %s", strings.Join(gaps, "; "))
	}
	fmt.Fprintf(b, ". Target every cell: **%s**.\n", metOr(gapOK == cells))

	// The informed upper bound.
	var lead []string
	for _, p := range g.points {
		inf, cm := g.medianCap(p, cluster.Informed), g.medianCap(p, ours)
		o, ov := g.bestOf(p, peer)
		if math.IsNaN(inf) || math.IsNaN(cm) || o == "" {
			continue
		}
		s := fmt.Sprintf("%s: informed %s, cost_model %s, best other %s %s req/s; the bound leads by %s×", p.name, rate(inf), rate(cm), o, rate(ov), f2(inf/ov))
		if inf > ov {
			s += fmt.Sprintf(", of which cost_model reaches %s", pct((cm-ov)/(inf-ov)))
		} else {
			s += ", no lead to share"
		}
		lead = append(lead, s)
	}
	if len(lead) == 0 {
		b.WriteString("- **Informed upper bound**: not measured.\n")
		return
	}
	fmt.Fprintf(b, "- **Informed upper bound** (%s: cost_model's decision on the engines' true state), capacity medians: %s.\n",
		cluster.Informed, strings.Join(lead, "; "))
}

func writeCapTable(b *strings.Builder, g *capGroup) {
	b.WriteString("\n### Capacity (req/s): median over seeds (range)\n\n| contender |")
	for _, p := range g.points {
		fmt.Fprintf(b, " %s |", p.name)
	}
	b.WriteString("\n|---|")
	for range g.points {
		b.WriteString("---:|")
	}
	var all []string
	for _, p := range g.points {
		for _, c := range p.contenders {
			if !slices.Contains(all, c) {
				all = append(all, c)
			}
		}
	}
	sortPolicies(all)
	b.WriteString("\n| *knee* |")
	for _, p := range g.points {
		k, n := p.knee(g.search)
		fmt.Fprintf(b, " *%s* (%d seeds) |", rate(k), n)
	}
	b.WriteString("\n")
	for _, c := range all {
		fmt.Fprintf(b, "| %s |", c)
		for _, p := range g.points {
			xs := p.capacity(g.search, c)
			cell := medRange(xs, rate)
			if n := len(p.reps); len(xs) < n && len(xs) > 0 || len(xs) == 0 && slices.Contains(p.contenders, c) {
				cell += fmt.Sprintf(", %d of %d seeds", len(xs), n)
			}
			fmt.Fprintf(b, " %s |", cell)
		}
		b.WriteString("\n")
	}
}

func writeCapPoint(b *strings.Builder, g *capGroup, p *capPoint) {
	fmt.Fprintf(b, "\n### %s\n\n", p.name)
	sp := p.spec
	events := ""
	if sp.KVEvents {
		events = ", the engines' KV events feeding the gateway's shadow indexes"
	}
	k, n := p.knee(g.search)
	fmt.Fprintf(b, "Workload %s on %d engines%s, %v of requests per run with the first %v left out, SLO TTFT ≤ %v and "+
		"TPOT ≤ %v, searches from %s req/s. Knee %s req/s (median over %d seeds of the best of %s).\n", sp.Kind, sp.Replicas,
		events, sp.Duration, sp.WarmUp, sp.SLO.TTFT, sp.SLO.TPOT, num(sp.MainRate), rate(k), n, strings.Join(g.search.Blind, ", "))
	for _, x := range p.scales {
		used := p.kneeRun(x)
		note := ""
		if math.Abs(used-k) > 1e-9*max(k, 1) {
			note = fmt.Sprintf(" (the runs used a knee of %s req/s: their searches' files have changed since)", rate(used))
		}
		fmt.Fprintf(b, "\n#### %s at %s× the knee, %s req/s%s\n\n", p.name, num(x), rate(used*x), note)
		b.WriteString("| contender | p99 TTFT (ms) | p99 TPOT (ms) | hit rate | within SLO |\n|---|---:|---:|---:|---:|\n")
		for _, c := range p.contenders {
			rs := p.scaled[x][c]
			if rs == nil {
				continue
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s |\n", c, medRange(values(rs, p99TTFT), ms), medRange(values(rs, p99TPOT), ms),
				medRange(values(rs, hitRate), f3), medRange(values(rs, goodShare), pct))
		}
	}
}
