package sweep

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/inferrail/inferrail/bench/harness"
	"github.com/inferrail/inferrail/model/sched"
)

// Targets the report judges against (the benchmark plan's).
const (
	// cost_model's p99 TTFT as a multiple of round_robin's at the main rate.
	targetW1 = 0.25
	targetW3 = 0.2
	// cost_model's hit rate as a share of the oracle's on W1, W3 and W5.
	targetOracle = 0.95
	// A rate is sustained while this share of its requests meet the SLO.
	sustainShare = 0.9
	// Virtual and real runs agree within this relative difference.
	agreeWithin = 0.1
)

// The policies the verdicts judge by name: the benchmark plan's targets are
// cost_model's against the cache-blind baselines. TestVerdictPolicies
// checks that each is a registered policy.
const (
	ours   = "cost_model"
	blind  = "round_robin"
	fewest = "least_request"
)

// group is the results of one sweep in one mode.
type group struct {
	mode, sweep string
	// twin is the same sweep in virtual time, for a real one: its runs
	// sent the same requests, so its oracle is the real runs' too.
	twin   *group
	points []*pointResults
	runs   int
	spec   *RunSpec // one run's, for the shared settings
	seeds  []uint64
}

type pointResults struct {
	name, kind string
	order      int
	main       float64
	rates      []float64
	policies   []string
	cells      map[cellKey][]*Result
	classes    []string
}

type cellKey struct {
	rate   float64
	policy string
}

// Report builds the Markdown report of results and its SVG charts, by
// file name ("report.md", "knee-W1.svg", …). It reads nothing but results,
// in any order, and the same results always give the same bytes.
func Report(results []*Result) (map[string][]byte, error) {
	if len(results) == 0 {
		return nil, fmt.Errorf("report: no results")
	}
	groups := groupResults(results)
	files := map[string][]byte{}
	var b strings.Builder
	b.WriteString("# Benchmark report\n\n")
	fmt.Fprintf(&b, "Built by `inferrail bench report` from %d result files alone. Every figure is the median over "+
		"a point's repetitions; TTFT and end-to-end latency count from each request's scheduled time. "+
		"Goodput counts the requests within the SLO per second of the measured window; a rate is sustained "+
		"while at least %.0f%% of its requests meet the SLO.\n", len(results), sustainShare*100)
	for _, g := range groups {
		writeGroup(&b, g, files)
	}
	writeAgreement(&b, groups)
	files["report.md"] = []byte(b.String())
	return files, nil
}

// WriteReport writes files into dir.
func WriteReport(dir string, files map[string][]byte) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(dir, n), files[n], 0o644); err != nil {
			return err
		}
	}
	return nil
}

func groupResults(results []*Result) []*group {
	byKey := map[[2]string]*group{}
	for _, r := range results {
		s := &r.Spec
		k := [2]string{s.Mode, s.Sweep}
		g := byKey[k]
		if g == nil {
			g = &group{mode: s.Mode, sweep: s.Sweep, spec: s}
			byKey[k] = g
		}
		g.runs++
		if first(s, g.spec) {
			g.spec = s
		}
		if !slices.Contains(g.seeds, s.Seed) {
			g.seeds = append(g.seeds, s.Seed)
		}
		var p *pointResults
		for _, q := range g.points {
			if q.name == s.Point {
				p = q
			}
		}
		if p == nil {
			p = &pointResults{name: s.Point, kind: s.Kind, order: s.Order, main: s.MainRate, cells: map[cellKey][]*Result{}}
			g.points = append(g.points, p)
		}
		if !slices.Contains(p.rates, s.Rate) {
			p.rates = append(p.rates, s.Rate)
		}
		if !slices.Contains(p.policies, s.Policy) {
			p.policies = append(p.policies, s.Policy)
		}
		for c := range r.Classes {
			if !slices.Contains(p.classes, c) {
				p.classes = append(p.classes, c)
			}
		}
		k2 := cellKey{s.Rate, s.Policy}
		p.cells[k2] = append(p.cells[k2], r)
	}
	out := make([]*group, 0, len(byKey))
	for _, g := range byKey {
		slices.Sort(g.seeds)
		byPlace(g.points, func(p *pointResults) (int, string) { return p.order, p.name })
		for _, p := range g.points {
			slices.Sort(p.rates)
			slices.Sort(p.classes)
			sortPolicies(p.policies)
			for _, rs := range p.cells {
				sort.Slice(rs, func(i, j int) bool { return rs[i].Spec.Repetition < rs[j].Spec.Repetition })
			}
		}
		out = append(out, g)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].sweep != out[j].sweep {
			return out[i].sweep < out[j].sweep
		}
		return out[i].mode > out[j].mode // virtual before real
	})
	for _, g := range out {
		if g.mode == "real" {
			g.twin = byKey[[2]string{"virtual", g.sweep}]
		}
	}
	return out
}

// byPlace sorts a sweep's points by their place in it: order, then
// name.
func byPlace[T any](points []T, place func(T) (int, string)) {
	sort.Slice(points, func(i, j int) bool {
		oi, ni := place(points[i])
		oj, nj := place(points[j])
		if oi != oj {
			return oi < oj
		}
		return ni < nj
	})
}

// first reports whether a comes before b in a sweep's plan.
func first(a, b *RunSpec) bool {
	switch {
	case a.Order != b.Order:
		return a.Order < b.Order
	case a.Rate != b.Rate:
		return a.Rate < b.Rate
	case a.Repetition != b.Repetition:
		return a.Repetition < b.Repetition
	}
	return a.Policy < b.Policy
}

// sortPolicies orders policies as the registry lists them (sched.Policies),
// then the profiles, sorted.
func sortPolicies(ps []string) {
	order := sched.Policies()
	rank := func(p string) int {
		if i := slices.Index(order, p); i >= 0 {
			return i
		}
		return len(order)
	}
	sort.Slice(ps, func(i, j int) bool {
		ri, rj := rank(ps[i]), rank(ps[j])
		if ri != rj {
			return ri < rj
		}
		return ps[i] < ps[j]
	})
}

// median of f over a cell's repetitions; NaN when f is undefined for all.
func median(rs []*Result, f func(*harness.Summary) (float64, bool)) float64 {
	var xs []float64
	for _, r := range rs {
		if v, ok := f(&r.Summary); ok {
			xs = append(xs, v)
		}
	}
	return medianOf(xs)
}

func medianOf(xs []float64) float64 {
	if len(xs) == 0 {
		return math.NaN()
	}
	xs = slices.Clone(xs)
	slices.Sort(xs)
	n := len(xs)
	if n%2 == 1 {
		return xs[n/2]
	}
	return (xs[n/2-1] + xs[n/2]) / 2
}

// Metrics of a summary, for median.
func always(f func(*harness.Summary) float64) func(*harness.Summary) (float64, bool) {
	return func(s *harness.Summary) (float64, bool) { return f(s), true }
}

var (
	mP99TTFT  = always(func(s *harness.Summary) float64 { return s.TTFT.P99 })
	mMeanTTFT = always(func(s *harness.Summary) float64 { return s.TTFT.Mean })
	mP50TTFT  = always(func(s *harness.Summary) float64 { return s.TTFT.P50 })
	mP99TPOT  = always(func(s *harness.Summary) float64 { return s.TPOT.P99 })
	mP99E2E   = always(func(s *harness.Summary) float64 { return s.E2E.P99 })
	mGoodput  = always(func(s *harness.Summary) float64 { return s.Goodput })
	mGood     = always(func(s *harness.Summary) float64 { return s.GoodShare })
	mHit      = always(func(s *harness.Summary) float64 { return s.HitRate })
	mBusiest  = always(func(s *harness.Summary) float64 { return s.BusiestShare })
	mPreempt  = always(func(s *harness.Summary) float64 { return float64(s.Preemptions) })
	mErrors   = always(func(s *harness.Summary) float64 { return float64(s.Errors) })
	mRequests = always(func(s *harness.Summary) float64 { return float64(s.Requests) })
	mOracle   = func(s *harness.Summary) (float64, bool) {
		if s.OracleHitRate == nil {
			return 0, false
		}
		return *s.OracleHitRate, true
	}
	mEngineHit = func(s *harness.Summary) (float64, bool) {
		if s.EngineHitRate == nil {
			return 0, false
		}
		return *s.EngineHitRate, true
	}
	mExact = func(s *harness.Summary) (float64, bool) {
		if s.Prediction == nil {
			return 0, false
		}
		return s.Prediction.Exact, true
	}
	mLag = func(s *harness.Summary) (float64, bool) {
		if s.SendLag.Max == 0 {
			return 0, false // virtual: no send lag
		}
		return s.SendLag.P99, true
	}
)

// classMedian is median over a class's summaries.
func classMedian(rs []*Result, class string, f func(*harness.Summary) float64) float64 {
	var xs []float64
	for _, r := range rs {
		if s, ok := r.Classes[class]; ok {
			xs = append(xs, f(&s))
		}
	}
	return medianOf(xs)
}

// Formatting. Every number goes through these, so output is stable.

// ms formats seconds as whole milliseconds with thousands separators, or
// tenths below 10 ms.
func ms(s float64) string {
	if math.IsNaN(s) {
		return "–"
	}
	v := s * 1000
	if v < 10 {
		return strconv.FormatFloat(v, 'f', 1, 64)
	}
	return thousands(int64(math.Round(v)))
}

func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}

func f2(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return strconv.FormatFloat(x, 'f', 2, 64)
}

func f3(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return strconv.FormatFloat(x, 'f', 3, 64)
}

func pct(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return strconv.FormatFloat(x*100, 'f', 1, 64) + "%"
}

func num(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return strconv.FormatFloat(x, 'g', -1, 64)
}

func count(x float64) string {
	if math.IsNaN(x) {
		return "–"
	}
	return thousands(int64(math.Round(x)))
}

// oracle is the oracle's hit rate of p at rate for policy: the group's
// own, or its virtual twin's.
func (g *group) oracle(p *pointResults, rate float64, policy string) (float64, bool) {
	if v := median(p.at(rate, policy), mOracle); !math.IsNaN(v) {
		return v, false
	}
	if g.twin != nil {
		for _, q := range g.twin.points {
			if q.name == p.name {
				return median(q.at(rate, policy), mOracle), true
			}
		}
	}
	return math.NaN(), false
}

func writeGroup(b *strings.Builder, g *group, files map[string][]byte) {
	s := g.spec
	fmt.Fprintf(b, "\n## Sweep %q in %s time\n\n", g.sweep, g.mode)
	seeds := make([]string, len(g.seeds))
	for i, x := range g.seeds {
		seeds[i] = strconv.FormatUint(x, 10)
	}
	fmt.Fprintf(b, "%d runs: %d points, each on %d simulated engines (block size %d, %d KV blocks, %d tokens per step) "+
		"with %v of requests per run and the first %v left out unless the point says otherwise, seeds %s, "+
		"estimate fanout %d, SLO TTFT ≤ %v and TPOT ≤ %v.\n",
		g.runs, len(g.points), s.Replicas, s.Engine.BlockSize, s.Engine.NumBlocks, s.Engine.MaxBatchedTokens,
		s.Duration, s.WarmUp, strings.Join(seeds, ", "), s.Fanout, s.SLO.TTFT, s.SLO.TPOT)

	writeVerdicts(b, g)
	writeHeadline(b, g)
	writeEveryRate(b, g)
	writeLosses(b, g)
	for _, p := range g.points {
		writePoint(b, g, p, files)
	}
}

// at is the cell of p at rate for policy.
func (p *pointResults) at(rate float64, policy string) []*Result {
	return p.cells[cellKey{rate, policy}]
}

func (g *group) point(kind string) *pointResults {
	for _, p := range g.points {
		if p.kind == kind {
			return p
		}
	}
	return nil
}

func writeVerdicts(b *strings.Builder, g *group) {
	b.WriteString("\n### Verdicts\n\n")
	ratio := func(kind string, target float64) {
		p := g.point(kind)
		if p == nil || p.at(p.main, ours) == nil || p.at(p.main, blind) == nil {
			fmt.Fprintf(b, "- cost_model against round_robin on %s: not measured in this sweep.\n", kind)
			return
		}
		cm, rr := median(p.at(p.main, ours), mP99TTFT), median(p.at(p.main, blind), mP99TTFT)
		r := cm / rr
		fmt.Fprintf(b, "- cost_model's p99 TTFT on %s (%s at %s req/s) is %s× round_robin's: %s ms against %s ms. "+
			"Target ≤ %s×: **%s**.\n", kind, p.name, num(p.main), f2(r), ms(cm), ms(rr), num(target), metOr(r <= target))
	}
	ratio("W1", targetW1)
	ratio("W3", targetW3)

	var worse []string
	compared := 0
	for _, p := range g.points {
		cm, lr := p.at(p.main, ours), p.at(p.main, fewest)
		if cm == nil || lr == nil {
			continue
		}
		compared++
		a, c := median(cm, mP99TTFT), median(lr, mP99TTFT)
		if a > c {
			worse = append(worse, fmt.Sprintf("%s (%s ms against %s ms, %s)", p.name, ms(a), ms(c), signedPct(a/c-1)))
		}
	}
	switch {
	case compared == 0:
		b.WriteString("- cost_model against least_request: not measured in this sweep.\n")
	case len(worse) == 0:
		fmt.Fprintf(b, "- No point where cost_model's p99 TTFT is worse than least_request's, of %d at their main rates: **met**.\n", compared)
	default:
		fmt.Fprintf(b, "- Points where cost_model's p99 TTFT is worse than least_request's at the main rate: %s. "+
			"Target none: **not met**.\n", strings.Join(worse, "; "))
	}

	var shares []string
	measured, all := 0, true
	for _, kind := range []string{"W1", "W3", "W5"} {
		p := g.point(kind)
		if p == nil || p.at(p.main, ours) == nil {
			shares = append(shares, kind+" not measured")
			continue
		}
		cm := p.at(p.main, ours)
		hit := median(cm, mHit)
		oracle, twin := g.oracle(p, p.main, ours)
		if math.IsNaN(oracle) {
			shares = append(shares, fmt.Sprintf("%s hit rate %s (no oracle in %s runs)", kind, f3(hit), g.mode))
			all = false
			continue
		}
		measured++
		share := hit / oracle
		all = all && share >= targetOracle
		from := ""
		if twin {
			from = ", the oracle's from the virtual twin, which sent the same requests"
		}
		shares = append(shares, fmt.Sprintf("%s %s (%s of %s%s)", kind, pct(share), f3(hit), f3(oracle), from))
	}
	verdict := "not measured"
	if measured > 0 {
		verdict = metOr(all)
	}
	fmt.Fprintf(b, "- cost_model's hit rate as a share of the oracle's at the main rate: %s. Target ≥ %.0f%% on each: **%s**.\n",
		strings.Join(shares, "; "), targetOracle*100, verdict)

	if p := g.point("W1"); p != nil && len(p.rates) > 1 {
		var parts []string
		for _, pol := range p.policies {
			parts = append(parts, pol+" "+sustained(p, pol))
		}
		fmt.Fprintf(b, "- The highest %s rate each policy sustains (every rate up to it with at least %.0f%% of requests within the SLO): %s.\n",
			p.name, sustainShare*100, strings.Join(parts, ", "))
	}
}

func metOr(ok bool) string {
	if ok {
		return "met"
	}
	return "not met"
}

// sustained is the highest rate up to which every rate keeps the SLO.
func sustained(p *pointResults, policy string) string {
	best := ""
	for i, r := range p.rates {
		c := p.at(r, policy)
		if c == nil || median(c, mGood) < sustainShare {
			if i == 0 {
				return "none of those swept (below " + num(r) + " req/s)"
			}
			return best + " req/s"
		}
		best = num(r)
	}
	return "at least " + best + " req/s (the highest swept)"
}

func writeHeadline(b *strings.Builder, g *group) {
	b.WriteString("\n### Headline: p99 TTFT at each point's main rate (ms)\n\n")
	b.WriteString("| policy |")
	for _, p := range g.points {
		fmt.Fprintf(b, " %s (%s/s) |", p.name, num(p.main))
	}
	b.WriteString("\n|---|")
	for range g.points {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	pols := g.policies()
	for _, pol := range pols {
		fmt.Fprintf(b, "| %s |", pol)
		for _, p := range g.points {
			fmt.Fprintf(b, " %s |", ms(median(p.at(p.main, pol), mP99TTFT)))
		}
		b.WriteString("\n")
	}
	row := func(label string, pol string, f func(*harness.Summary) (float64, bool)) {
		fmt.Fprintf(b, "| %s |", label)
		for _, p := range g.points {
			fmt.Fprintf(b, " %s |", f2(median(p.at(p.main, pol), f)))
		}
		b.WriteString("\n")
	}
	if slices.Contains(pols, ours) {
		row(ours+" hit rate", ours, mHit)
		label := "oracle hit rate"
		if g.twin != nil {
			label = "oracle hit rate (virtual twin)"
		}
		fmt.Fprintf(b, "| %s |", label)
		for _, p := range g.points {
			o, _ := g.oracle(p, p.main, ours)
			fmt.Fprintf(b, " %s |", f2(o))
		}
		b.WriteString("\n")
	}
}

func writePoint(b *strings.Builder, g *group, p *pointResults, files map[string][]byte) {
	fmt.Fprintf(b, "\n### %s\n\n", p.name)
	if rs := p.at(p.main, p.policies[0]); len(rs) > 0 {
		sp := &rs[0].Spec
		var params bytes.Buffer
		if json.Compact(&params, sp.Params) != nil {
			params.Reset()
		}
		events := ""
		if sp.KVEvents {
			events = ", the engines' KV events feeding the gateway's shadow indexes"
		}
		fmt.Fprintf(b, "Workload %s on %d engines%s, %v of requests per run with the first %v left out: `%s`.\n\n",
			p.kind, sp.Replicas, events, sp.Duration, sp.WarmUp, params.String())
	}
	oracle, _ := g.oracle(p, p.main, ours)
	b.WriteString(pointHeadline(p, oracle) + "\n")

	prefix := g.mode + "-" + slug(g.sweep) + "-" + slug(p.name)
	if len(p.rates) > 1 {
		var knee, good []series
		for _, pol := range p.policies {
			k := series{name: pol}
			gd := series{name: pol}
			for _, r := range p.rates {
				c := p.at(r, pol)
				if c == nil {
					continue
				}
				k.xs, k.ys = append(k.xs, r), append(k.ys, median(c, mP99TTFT))
				gd.xs, gd.ys = append(gd.xs, r), append(gd.ys, median(c, mGoodput))
			}
			knee, good = append(knee, k), append(good, gd)
		}
		if svg, err := chart(p.name+": p99 TTFT as load rises", "p99 TTFT (s)", true, false, knee); err == nil {
			files["knee-"+prefix+".svg"] = svg
			fmt.Fprintf(b, "\n![%s knee](knee-%s.svg)\n", p.name, prefix)
		} else {
			fmt.Fprintf(b, "\n(knee chart failed: %v)\n", err)
		}
		if svg, err := chart(p.name+": goodput as load rises", "goodput (req/s within the SLO)", false, true, good); err == nil {
			files["goodput-"+prefix+".svg"] = svg
			fmt.Fprintf(b, "![%s goodput](goodput-%s.svg)\n", p.name, prefix)
		} else {
			fmt.Fprintf(b, "(goodput chart failed: %v)\n", err)
		}
	}
	for _, r := range p.rates {
		main := ""
		if r == p.main {
			main = " (main rate)"
		}
		fmt.Fprintf(b, "\n#### %s at %s req/s%s\n\n", p.name, num(r), main)
		b.WriteString("| policy | requests | mean TTFT | p50 TTFT | p99 TTFT | p99 TPOT | p99 E2E | goodput | within SLO | hit | engine hit | oracle | exact | busiest | preempted | errors | p99 lag |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, pol := range p.policies {
			c := p.at(r, pol)
			if c == nil {
				continue
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
				pol, count(median(c, mRequests)), ms(median(c, mMeanTTFT)), ms(median(c, mP50TTFT)), ms(median(c, mP99TTFT)),
				ms(median(c, mP99TPOT)), ms(median(c, mP99E2E)), f2(median(c, mGoodput)), pct(median(c, mGood)),
				f3(median(c, mHit)), f3(median(c, mEngineHit)), f3(median(c, mOracle)), pct(median(c, mExact)),
				f3(median(c, mBusiest)), count(median(c, mPreempt)), count(median(c, mErrors)), ms(median(c, mLag)))
		}
		if len(p.classes) > 1 {
			b.WriteString("\nBy class, p99 TTFT (ms) and hit rate:\n\n| policy |")
			for _, cl := range p.classes {
				fmt.Fprintf(b, " %s p99 | %s hit |", cl, cl)
			}
			b.WriteString("\n|---|")
			for range p.classes {
				b.WriteString("---:|---:|")
			}
			b.WriteString("\n")
			for _, pol := range p.policies {
				c := p.at(r, pol)
				if c == nil {
					continue
				}
				fmt.Fprintf(b, "| %s |", pol)
				for _, cl := range p.classes {
					fmt.Fprintf(b, " %s | %s |", ms(classMedian(c, cl, func(s *harness.Summary) float64 { return s.TTFT.P99 })),
						f3(classMedian(c, cl, func(s *harness.Summary) float64 { return s.HitRate })))
				}
				b.WriteString("\n")
			}
		}
	}
}

// pointHeadline is one sentence on a point at its main rate.
func pointHeadline(p *pointResults, oracle float64) string {
	best, bestV := "", math.Inf(1)
	for _, pol := range p.policies {
		if v := median(p.at(p.main, pol), mP99TTFT); v < bestV {
			best, bestV = pol, v
		}
	}
	s := fmt.Sprintf("At %s req/s %s has the lowest p99 TTFT, %s ms.", num(p.main), best, ms(bestV))
	cm := p.at(p.main, ours)
	if cm == nil {
		return s
	}
	v := median(cm, mP99TTFT)
	var rel []string
	for _, base := range []string{blind, fewest} {
		if c := p.at(p.main, base); c != nil {
			rel = append(rel, fmt.Sprintf("%s× %s's", f2(v/median(c, mP99TTFT)), base))
		}
	}
	if best != ours || len(rel) > 0 {
		s += fmt.Sprintf(" cost_model's is %s ms", ms(v))
		if len(rel) > 0 {
			s += ", " + strings.Join(rel, " and ")
		}
		s += "."
	}
	if !math.IsNaN(oracle) {
		s += fmt.Sprintf(" It keeps %s of prompt tokens cached, where an oracle keeps %s.", pct(median(cm, mHit)), pct(oracle))
	} else {
		s += fmt.Sprintf(" It keeps %s of prompt tokens cached.", pct(median(cm, mHit)))
	}
	return s
}

// writeAgreement compares the virtual and real runs of the same sweep at
// each point's main rate: mean TTFT and hit rate per policy.
func writeAgreement(b *strings.Builder, groups []*group) {
	for _, real := range groups {
		if real.mode != "real" {
			continue
		}
		var virt *group
		for _, g := range groups {
			if g.mode == "virtual" && g.sweep == real.sweep {
				virt = g
			}
		}
		if virt == nil {
			continue
		}
		fmt.Fprintf(b, "\n## Agreement: virtual against real time, sweep %q\n\n", real.sweep)
		fmt.Fprintf(b, "Each point at its main rate, medians over repetitions; the difference is relative to the real run "+
			"(hit rates below 0.01 compare absolutely). Target: within %.0f%%.\n\n", agreeWithin*100)
		b.WriteString("| point | policy | mean TTFT virtual | mean TTFT real | difference | hit virtual | hit real | difference |\n")
		b.WriteString("|---|---|---:|---:|---:|---:|---:|---:|\n")
		pairs, okTTFT, okHit := 0, 0, 0
		for _, rp := range real.points {
			var vp *pointResults
			for _, q := range virt.points {
				if q.name == rp.name {
					vp = q
				}
			}
			if vp == nil {
				continue
			}
			for _, pol := range rp.policies {
				rc, vc := rp.at(rp.main, pol), vp.at(rp.main, pol)
				if rc == nil || vc == nil {
					continue
				}
				pairs++
				rt, vt := median(rc, mMeanTTFT), median(vc, mMeanTTFT)
				rh, vh := median(rc, mHit), median(vc, mHit)
				dt := (vt - rt) / rt
				dh := vh - rh
				if rh >= 0.01 {
					dh = (vh - rh) / rh
				}
				if math.Abs(dt) <= agreeWithin {
					okTTFT++
				}
				if math.Abs(dh) <= agreeWithin {
					okHit++
				}
				fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s |\n", rp.name, pol, ms(vt), ms(rt), signedPct(dt),
					f3(vh), f3(rh), signedPct(dh))
			}
		}
		fmt.Fprintf(b, "\nMean TTFT within %.0f%% on %d of %d pairs, hit rate on %d of %d.\n",
			agreeWithin*100, okTTFT, pairs, okHit, pairs)
	}
}

func signedPct(x float64) string {
	if math.IsNaN(x) || math.IsInf(x, 0) {
		return "–"
	}
	s := strconv.FormatFloat(x*100, 'f', 1, 64) + "%"
	if x >= 0 {
		s = "+" + s
	}
	return s
}
