package sweep

import (
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/inferrail/inferrail/bench/harness"
)

// policies lists the policies and profiles of every point of g, in report
// order.
func (g *group) policies() []string {
	var pols []string
	for _, p := range g.points {
		for _, pol := range p.policies {
			if !slices.Contains(pols, pol) {
				pols = append(pols, pol)
			}
		}
	}
	sortPolicies(pols)
	return pols
}

// writeEveryRate is the comparison at a glance: each policy's and
// profile's p99 TTFT, hit rate and goodput at every point and rate.
func writeEveryRate(b *strings.Builder, g *group) {
	pols := g.policies()
	b.WriteString("\n### Every point and rate: p99 TTFT (ms) / hit rate / goodput (req/s within the SLO)\n\n| point | req/s | of main |")
	for _, pol := range pols {
		fmt.Fprintf(b, " %s |", pol)
	}
	b.WriteString("\n|---|---:|---:|")
	for range pols {
		b.WriteString("---:|")
	}
	b.WriteString("\n")
	for _, p := range g.points {
		for _, r := range p.rates {
			fmt.Fprintf(b, "| %s | %s | %s× |", p.name, num(r), f2(r/p.main))
			for _, pol := range pols {
				c := p.at(r, pol)
				if c == nil {
					b.WriteString(" – |")
					continue
				}
				fmt.Fprintf(b, " %s / %s / %s |", ms(median(c, mP99TTFT)), f3(median(c, mHit)), f2(median(c, mGoodput)))
			}
			b.WriteString("\n")
		}
	}
}

// loss is a metric cost_model is compared on.
type loss struct {
	name   string
	metric func(*harness.Summary) (float64, bool)
	format func(float64) string
	lower  bool // lower is better
}

var losses = []loss{
	{"p99 TTFT", mP99TTFT, func(x float64) string { return ms(x) + " ms" }, true},
	{"hit rate", mHit, f3, false},
	{"goodput", mGoodput, func(x float64) string { return f2(x) + " req/s" }, false},
}

// writeLosses says plainly where cost_model loses: at each point and rate,
// each metric on which another policy or profile of the sweep does better,
// with the best of them.
func writeLosses(b *strings.Builder, g *group) {
	pols := g.policies()
	if !slices.Contains(pols, ours) || len(pols) < 2 {
		return
	}
	fmt.Fprintf(b, "\n### Where %s loses\n\n", ours)
	var rows []string
	won := make([]int, len(losses))
	cells := 0
	for _, p := range g.points {
		for _, r := range p.rates {
			cm := p.at(r, ours)
			if cm == nil {
				continue
			}
			cells++
			for k, l := range losses {
				v := median(cm, l.metric)
				best, bestV := "", v
				for _, pol := range pols {
					c := p.at(r, pol)
					if pol == ours || c == nil {
						continue
					}
					if o := median(c, l.metric); l.lower && o < bestV || !l.lower && o > bestV {
						best, bestV = pol, o
					}
				}
				if best == "" {
					won[k]++
					continue
				}
				lo, hi := spread(cm, l.metric)
				within := "no"
				if bestV >= lo && bestV <= hi {
					within = "yes"
				}
				rows = append(rows, fmt.Sprintf("| %s | %s | %s | %s | %s–%s | %s %s | %s | %s |", p.name, num(r), l.name,
					l.format(v), l.format(lo), l.format(hi), best, l.format(bestV), signedPct(bestV/v-1), within))
			}
		}
	}
	var parts []string
	for k, l := range losses {
		parts = append(parts, fmt.Sprintf("the best %s in %d", l.name, won[k]))
	}
	fmt.Fprintf(b, "Of %d points and rates, %s has %s (ties count as its). ", cells, ours, strings.Join(parts, ", "))
	if len(rows) == 0 {
		fmt.Fprintf(b, "No other policy or profile of the sweep beats it on any of them.\n")
		return
	}
	fmt.Fprintf(b, "Everywhere another does better, with the best of the others: the difference is relative to %s's "+
		"median, and \"within its seeds\" says whether the better median lies within the range of %s's repetitions.\n\n", ours, ours)
	fmt.Fprintf(b, "| point | req/s | metric | %s | its seeds | better | difference | within its seeds |\n"+
		"|---|---:|---|---:|---:|---|---:|---|\n", ours)
	for _, row := range rows {
		b.WriteString(row + "\n")
	}
}

// spread is the lowest and highest of f over a cell's repetitions.
func spread(rs []*Result, f func(*harness.Summary) (float64, bool)) (lo, hi float64) {
	lo, hi = math.Inf(1), math.Inf(-1)
	for _, r := range rs {
		if v, ok := f(&r.Summary); ok {
			lo, hi = min(lo, v), max(hi, v)
		}
	}
	return lo, hi
}
