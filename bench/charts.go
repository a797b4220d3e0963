package bench

import (
	"bytes"
	"fmt"
	"html/template"
	"image/color"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// The charts are drawn by gonum/plot into SVG and inlined in the HTML
// report: no external assets, no scripts.

var (
	colorP50   = color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}
	colorP99   = color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}
	colorMax   = color.RGBA{R: 0x99, G: 0x99, B: 0x99, A: 0xff}
	colorOK    = color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff}
	colorLimit = color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff}
)

const chartW, chartH = 18 * vg.Centimeter, 8 * vg.Centimeter

// svgOf renders p as an inline <svg> element.
func svgOf(p *plot.Plot, err error) (template.HTML, error) {
	if p == nil || err != nil {
		return "", err
	}
	c := vgsvg.New(chartW, chartH)
	p.Draw(draw.New(c))
	var buf bytes.Buffer
	if _, err := c.WriteTo(&buf); err != nil {
		return "", err
	}
	s := buf.String()
	if i := strings.Index(s, "<svg"); i >= 0 {
		s = s[i:] // drop the XML prolog: the element goes inside HTML
	}
	// The SVG is generated here from numbers and fixed labels only.
	return template.HTML(s), nil
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = x
	p.Y.Label.Text = y
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p
}

// headroom leaves the top quarter free for the legend.
func headroom(p *plot.Plot, sets ...plotter.XYs) {
	top := 0.0
	for _, xys := range sets {
		for _, xy := range xys {
			top = max(top, xy.Y)
		}
	}
	if top > 0 {
		p.Y.Max = top * 1.35
	}
}

func addLine(p *plot.Plot, name string, xys plotter.XYs, c color.Color, dashed bool) error {
	if len(xys) == 0 {
		return nil
	}
	l, err := plotter.NewLine(xys)
	if err != nil {
		return err
	}
	l.Color = c
	l.Width = vg.Points(1.5)
	if dashed {
		l.Dashes = []vg.Length{vg.Points(4), vg.Points(3)}
	}
	p.Add(l)
	p.Legend.Add(name, l)
	return nil
}

// latencyOverTimePlot plots p50, p99 and max per second of intended send time.
func latencyOverTimePlot(secs []SecondStat) (*plot.Plot, error) {
	p := newPlot("Latency over time (by intended send second)", "second of the run", "latency (ms)")
	var p50, p99, mx plotter.XYs
	for _, s := range secs {
		if s.Requests == 0 {
			continue
		}
		x := float64(s.Second) + 0.5
		p50 = append(p50, plotter.XY{X: x, Y: s.P50})
		p99 = append(p99, plotter.XY{X: x, Y: s.P99})
		mx = append(mx, plotter.XY{X: x, Y: s.Max})
	}
	if len(p50) == 0 {
		return nil, nil
	}
	p.Y.Min = 0
	headroom(p, mx)
	for _, l := range []struct {
		name   string
		xys    plotter.XYs
		c      color.Color
		dashed bool
	}{{"max", mx, colorMax, true}, {"p99", p99, colorP99, false}, {"p50", p50, colorP50, false}} {
		if err := addLine(p, l.name, l.xys, l.c, l.dashed); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// throughputPlot plots requests, 201s and errors per second.
func throughputPlot(secs []SecondStat) (*plot.Plot, error) {
	p := newPlot("Throughput (by intended send second)", "second of the run", "per second")
	var req, ok, errs plotter.XYs
	for _, s := range secs {
		x := float64(s.Second) + 0.5
		req = append(req, plotter.XY{X: x, Y: float64(s.Requests)})
		ok = append(ok, plotter.XY{X: x, Y: float64(s.Created)})
		errs = append(errs, plotter.XY{X: x, Y: float64(s.Errors)})
	}
	if len(req) == 0 {
		return nil, nil
	}
	p.Y.Min = 0
	headroom(p, req, ok, errs)
	if err := addLine(p, "requests", req, colorP50, false); err != nil {
		return nil, err
	}
	if err := addLine(p, "201", ok, colorOK, false); err != nil {
		return nil, err
	}
	if err := addLine(p, "5xx + transport", errs, colorP99, true); err != nil {
		return nil, err
	}
	return p, nil
}

// histogramPlot plots the distribution on a log latency axis.
func histogramPlot(buckets []Bucket) (*plot.Plot, error) {
	if len(buckets) == 0 {
		return nil, nil
	}
	p := newPlot("Latency histogram (all requests)", "latency (ms, log scale)", "requests")
	h := &plotter.Histogram{FillColor: colorP50}
	h.LineStyle.Width = vg.Points(0.5)
	h.LineStyle.Color = color.White
	for _, b := range buckets {
		h.Bins = append(h.Bins, plotter.HistogramBin{Min: b.FromMs, Max: b.ToMs, Weight: float64(b.Count)})
	}
	p.Add(h)
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min = 0
	return p, nil
}

// rampPlot plots each step's p50 and p99 against its offered rate, with
// the p99 limit.
func rampPlot(r *Ramp) (*plot.Plot, error) {
	if r == nil || len(r.Steps) == 0 {
		return nil, nil
	}
	limitMs := r.P99Ms
	p := newPlot(fmt.Sprintf("Ramp: latency per step (limit p99 %.0f ms)", limitMs), "offered bids/s (log scale)", "latency (ms)")
	var p50, p99, lim plotter.XYs
	for _, s := range r.Steps {
		p50 = append(p50, plotter.XY{X: s.Offered, Y: s.Latency.P50})
		p99 = append(p99, plotter.XY{X: s.Offered, Y: s.Latency.P99})
	}
	lim = plotter.XYs{{X: r.Steps[0].Offered, Y: limitMs}, {X: r.Steps[len(r.Steps)-1].Offered * 1.0001, Y: limitMs}}
	for _, l := range []struct {
		name   string
		xys    plotter.XYs
		c      color.Color
		dashed bool
	}{{"p99 limit", lim, colorLimit, true}, {"p99", p99, colorP99, false}, {"p50", p50, colorP50, false}} {
		if err := addLine(p, l.name, l.xys, l.c, l.dashed); err != nil {
			return nil, err
		}
	}
	p.X.Scale = plot.LogScale{}
	p.X.Tick.Marker = plot.LogTicks{Prec: -1}
	p.Y.Min = 0
	headroom(p, p50, p99, lim)
	return p, nil
}

// closePlot plots CLOSED auctions against seconds since the first end.
func closePlot(b *CloseBurst) (*plot.Plot, error) {
	if b == nil || len(b.Timeline) == 0 {
		return nil, nil
	}
	p := newPlot("Close burst: auctions CLOSED", "seconds since the first end (database clock)", "CLOSED")
	var xys plotter.XYs
	for _, pt := range b.Timeline {
		xys = append(xys, plotter.XY{X: pt.T, Y: float64(pt.Closed)})
	}
	p.Y.Min = 0
	p.Y.Max = float64(b.Auctions) * 1.35
	if err := addLine(p, "closed", xys, colorOK, false); err != nil {
		return nil, err
	}
	if err := addLine(p, "auctions", plotter.XYs{{X: xys[0].X, Y: float64(b.Auctions)}, {X: xys[len(xys)-1].X + 0.001, Y: float64(b.Auctions)}}, colorMax, true); err != nil {
		return nil, err
	}
	return p, nil
}
