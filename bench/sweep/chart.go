package sweep

import (
	"bytes"
	"fmt"
	"image/color"
	"math"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"
)

// series is one policy's line on a chart.
type series struct {
	name string
	xs   []float64
	ys   []float64
}

// chart draws lines of series as an SVG: a knee chart (p99 TTFT against
// the rate, on a log scale) or a goodput chart (goodput against the rate,
// with the offered rate as a dashed diagonal).
func chart(title, ylabel string, logY, diagonal bool, lines []series) ([]byte, error) {
	return drawChart("svg", title, ylabel, logY, diagonal, lines)
}

// drawChart is chart in an image format gonum/plot writes.
func drawChart(format, title, ylabel string, logY, diagonal bool, lines []series) ([]byte, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = "offered rate (req/s)"
	p.Y.Label.Text = ylabel
	p.Legend.Top = true
	p.Legend.Left = true
	p.Add(plotter.NewGrid())
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, s := range lines {
		for i := range s.xs {
			lo, hi = min(lo, s.ys[i]), max(hi, s.ys[i])
		}
	}
	if logY {
		p.Y.Scale = plot.LogScale{}
		p.Y.Tick.Marker = plot.LogTicks{Prec: -1}
		lo = max(lo, 1e-3) // a log axis cannot show 0
	}
	if diagonal && len(lines) > 0 {
		xs := lines[0].xs
		d := make(plotter.XYs, len(xs))
		for i, x := range xs {
			d[i] = plotter.XY{X: x, Y: x}
			hi = max(hi, x)
		}
		l, err := plotter.NewLine(d)
		if err != nil {
			return nil, err
		}
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
		l.Color = color.Gray{Y: 96}
		p.Add(l)
		p.Legend.Add("offered", l)
	}
	for i, s := range lines {
		xy := make(plotter.XYs, len(s.xs))
		for j := range s.xs {
			y := s.ys[j]
			if logY {
				y = max(y, lo)
			}
			xy[j] = plotter.XY{X: s.xs[j], Y: y}
		}
		l, pts, err := plotter.NewLinePoints(xy)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", s.name, err)
		}
		l.Color, pts.Color = plotutil.Color(i), plotutil.Color(i)
		l.Dashes = plotutil.Dashes(i)
		pts.Shape = plotutil.Shape(i)
		p.Add(l, pts)
		p.Legend.Add(s.name, l, pts)
	}
	if !math.IsInf(lo, 0) {
		p.Y.Min, p.Y.Max = lo, hi
		if logY {
			p.Y.Max = hi * 1.5
		} else {
			p.Y.Min, p.Y.Max = 0, hi*1.1
		}
	}
	wt, err := p.WriterTo(7*vg.Inch, 4.5*vg.Inch, format)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	if _, err := wt.WriteTo(&b); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}
