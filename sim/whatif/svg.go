package whatif

import (
	"fmt"
	"html"
	"math"
	"strconv"
	"strings"
)

// A small SVG writer for the report's two charts: no plotting library, so
// that the product binary carries none.

// palette colours the series, in route order (Tableau 10).
var palette = []string{"#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"}

func colour(i int) string { return palette[i%len(palette)] }

// Chart geometry, in pixels.
const (
	chartW, chartH = 900, 480
	padL, padR     = 80, 220 // the legend sits on the right
	padT, padB     = 50, 60
)

// canvas collects an SVG document.
type canvas struct{ b strings.Builder }

func newCanvas(title string) *canvas {
	c := &canvas{}
	fmt.Fprintf(&c.b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="12">`+"\n",
		chartW, chartH, chartW, chartH)
	fmt.Fprintf(&c.b, `<rect width="%d" height="%d" fill="white"/>`+"\n", chartW, chartH)
	c.text(chartW/2, 24, "middle", 15, title)
	return c
}

func (c *canvas) text(x, y float64, anchor string, size int, s string) {
	fmt.Fprintf(&c.b, `<text x="%.1f" y="%.1f" text-anchor="%s" font-size="%d">%s</text>`+"\n", x, y, anchor, size, html.EscapeString(s))
}

func (c *canvas) line(x1, y1, x2, y2 float64, stroke string, width float64, dash string) {
	d := ""
	if dash != "" {
		d = ` stroke-dasharray="` + dash + `"`
	}
	fmt.Fprintf(&c.b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="%.1f"%s/>`+"\n", x1, y1, x2, y2, stroke, width, d)
}

func (c *canvas) legend(names []string) {
	for i, n := range names {
		y := float64(padT + 10 + 20*i)
		x := float64(chartW - padR + 20)
		fmt.Fprintf(&c.b, `<rect x="%.1f" y="%.1f" width="14" height="10" fill="%s"/>`+"\n", x, y-9, colour(i))
		c.text(x+20, y, "start", 12, n)
	}
}

func (c *canvas) String() string { return c.b.String() + "</svg>\n" }

// plot maps data to the plotting area.
type plot struct {
	x0, x1 float64 // data range on x
	y0, y1 float64 // data range on y (log10 when logY)
	logY   bool
}

func (p *plot) px(x float64) float64 {
	if p.x1 == p.x0 {
		return padL + float64(chartW-padL-padR)/2
	}
	return padL + (x-p.x0)/(p.x1-p.x0)*float64(chartW-padL-padR)
}

func (p *plot) py(y float64) float64 {
	if p.logY {
		y = math.Log10(y)
	}
	return float64(chartH-padB) - (y-p.y0)/(p.y1-p.y0)*float64(chartH-padT-padB)
}

// metric is a latency a knee chart draws: its name, its SLO in seconds
// and its value in a point.
type metric struct {
	name string
	slo  float64
	of   func(*Result) float64
}

func (rep *Report) metrics() [2]metric {
	return [2]metric{
		{"p99 TTFT", rep.SLOTTFT, func(r *Result) float64 { return r.P99TTFT }},
		{"p99 TPOT", rep.SLOTPOT, func(r *Result) float64 { return r.P99TPOT }},
	}
}

// kneeChart is metric m against replicas at scale i, one line per policy,
// on a log scale, with the SLO as a dashed line.
func (rep *Report) kneeChart(i int, m metric) string {
	scale := rep.Scales[i]
	c := newCanvas(fmt.Sprintf("%s against replicas, scale %g (%s)", m.name, scale, rep.Workload))
	lo, hi := m.slo, m.slo
	for k := range rep.Points {
		if pt := &rep.Points[k]; pt.Scale == scale && m.of(pt) > 0 {
			lo, hi = min(lo, m.of(pt)), max(hi, m.of(pt))
		}
	}
	p := &plot{x0: float64(rep.Replicas[0]), x1: float64(rep.largest()),
		y0: math.Floor(math.Log10(lo)), y1: math.Ceil(math.Log10(hi)), logY: true}
	if p.y1 <= p.y0 {
		p.y1 = p.y0 + 1
	}
	rep.axes(c, p, "replicas", m.name+" (s), log scale")
	for e := p.y0; e <= p.y1; e++ {
		y := p.py(math.Pow(10, e))
		c.line(padL, y, chartW-padR, y, "#ddd", 1, "")
		c.text(padL-8, y+4, "end", 11, strconv.FormatFloat(math.Pow(10, e), 'g', -1, 64))
	}
	slo := p.py(m.slo)
	c.line(padL, slo, chartW-padR, slo, "#333", 1.5, "6 4")
	c.text(chartW-padR-4, slo-6, "end", 11, "SLO "+ms(m.slo)+" ms")
	for ri, r := range rep.Routes {
		var pts []string
		for k := range rep.Points {
			pt := &rep.Points[k]
			if pt.Route != r || pt.Scale != scale || m.of(pt) <= 0 {
				continue
			}
			x, y := p.px(float64(pt.Replicas)), p.py(m.of(pt))
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x, y))
			fill := colour(ri)
			if !pt.Meets {
				fill = "white"
			}
			fmt.Fprintf(&c.b, `<circle cx="%.1f" cy="%.1f" r="4" fill="%s" stroke="%s" stroke-width="2"><title>%s, %d replicas: %s %s ms</title></circle>`+"\n",
				x, y, fill, colour(ri), html.EscapeString(r), pt.Replicas, m.name, ms(m.of(pt)))
		}
		if len(pts) > 1 {
			fmt.Fprintf(&c.b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>`+"\n", strings.Join(pts, " "), colour(ri))
		}
	}
	c.legend(rep.Routes)
	c.text(padL, chartH-8, "start", 11, "filled: meets the whole SLO (TTFT and TPOT); hollow: misses it. Counts a search skipped are not drawn.")
	return c.String()
}

// replicasChart is the fewest replicas meeting the SLO, one group of bars
// per scale, one bar per policy; a policy that met it nowhere gets a hatched
// bar at one more than the largest count swept.
func (rep *Report) replicasChart() string {
	c := newCanvas("Fewest replicas meeting the SLO (" + rep.Workload + ")")
	top := rep.largest() + 1
	p := &plot{x0: 0, x1: float64(len(rep.Scales)), y0: 0, y1: float64(top)}
	rep.axes(c, p, "load (scale of the traffic's rate)", "replicas")
	step := max(1, top/8)
	for v := 0; v <= top; v += step {
		y := p.py(float64(v))
		c.line(padL, y, chartW-padR, y, "#ddd", 1, "")
		c.text(padL-8, y+4, "end", 11, strconv.Itoa(v))
	}
	c.b.WriteString(`<defs><pattern id="none" width="6" height="6" patternUnits="userSpaceOnUse" patternTransform="rotate(45)"><rect width="6" height="6" fill="white"/><line x1="0" y1="0" x2="0" y2="6" stroke="#999" stroke-width="3"/></pattern></defs>` + "\n")
	group := float64(chartW-padL-padR) / float64(len(rep.Scales))
	bar := group * 0.8 / float64(max(len(rep.Routes), 1))
	for si, s := range rep.Scales {
		x0 := padL + group*float64(si) + group*0.1
		c.text(x0+group*0.4, float64(chartH-padB+18), "middle", 12, fmt.Sprintf("×%g", s))
		for ri, r := range rep.Routes {
			var f *Fewest
			for k := range rep.Fewest {
				if rep.Fewest[k].Route == r && rep.Fewest[k].Scale == s {
					f = &rep.Fewest[k]
				}
			}
			if f == nil {
				continue
			}
			n, fill, label := f.Replicas, colour(ri), strconv.Itoa(f.Replicas)
			if n == 0 {
				n, fill, label = top, "url(#none)", ">"+strconv.Itoa(rep.largest())
			}
			x, y := x0+bar*float64(ri), p.py(float64(n))
			fmt.Fprintf(&c.b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="%s" stroke="%s"><title>%s at ×%g: %s replicas</title></rect>`+"\n",
				x, y, bar*0.9, p.py(0)-y, fill, colour(ri), html.EscapeString(r), s, label)
			if bar >= 14 {
				c.text(x+bar*0.45, y-4, "middle", 10, label)
			}
		}
	}
	c.legend(rep.Routes)
	return c.String()
}

// axes draws the plotting area's frame and axis labels, and the x ticks of
// the replica counts when x is replicas.
func (rep *Report) axes(c *canvas, p *plot, xlabel, ylabel string) {
	c.line(padL, chartH-padB, chartW-padR, chartH-padB, "#333", 1, "")
	c.line(padL, padT, padL, chartH-padB, "#333", 1, "")
	c.text(float64(padL+chartW-padR)/2, chartH-30, "middle", 12, xlabel)
	fmt.Fprintf(&c.b, `<text x="20" y="%.1f" text-anchor="middle" font-size="12" transform="rotate(-90 20 %.1f)">%s</text>`+"\n",
		float64(padT+chartH-padB)/2, float64(padT+chartH-padB)/2, html.EscapeString(ylabel))
	if xlabel != "replicas" {
		return
	}
	for _, n := range rep.Replicas {
		x := p.px(float64(n))
		c.line(x, chartH-padB, x, chartH-padB+5, "#333", 1, "")
		c.text(x, chartH-padB+18, "middle", 11, strconv.Itoa(n))
	}
}
