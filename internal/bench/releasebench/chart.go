package releasebench

import (
	"fmt"
	"image/color"
	"math"
	"os"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"
)

// Colours of the designs, alike in every panel.
var (
	colourSlotwheel = color.RGBA{R: 0x1f, G: 0x5f, B: 0xbf, A: 0xff}
	colourAsynq     = color.RGBA{R: 0xe0, G: 0x70, B: 0x10, A: 0xff}
	colourPoll      = color.RGBA{R: 0x2a, G: 0x9a, B: 0x40, A: 0xff}
	colourComputed  = color.RGBA{R: 0x80, G: 0x80, B: 0x80, A: 0xff}
	colourGoal      = color.RGBA{R: 0xc0, G: 0x20, B: 0x20, A: 0xff}
)

// chartMinMs is the left edge of the log axis: lags below it (and early releases, which are counted
// in the legend) are drawn at it, as the CDF there includes them.
const chartMinMs = 1.0

// WriteChart draws the lag distributions as one panel of CDFs per case — fraction of bookings
// released against lag, on a log axis — one line per design, the goals marked, and writes
// it as a PNG to path.
func (rep *Report) WriteChart(path string) error {
	var cases []Case
	for _, r := range rep.Rows {
		if len(cases) == 0 || cases[len(cases)-1] != r.Case {
			cases = append(cases, r.Case)
		}
	}
	if len(cases) == 0 {
		return fmt.Errorf("chart: no rows")
	}
	maxMs := 10.0
	for _, r := range rep.Rows {
		maxMs = max(maxMs, r.MaxMs)
	}
	xMax := math.Pow(10, math.Ceil(math.Log10(maxMs*1.05)))
	plots := make([][]*plot.Plot, len(cases))
	for i, k := range cases {
		p := plot.New()
		p.Title.Text = rep.caseTitle(k)
		p.X.Label.Text = "lag after release_at (log scale)"
		p.Y.Label.Text = "fraction of bookings released"
		p.X.Scale = plot.LogScale{}
		p.X.Min, p.X.Max = chartMinMs, xMax
		p.X.Tick.Marker = msTicks(xMax)
		// Room above 1.0 for the legend, so no line runs under it.
		p.Y.Min, p.Y.Max = 0, 1.45
		p.Y.Tick.Marker = plot.ConstantTicks([]plot.Tick{{Value: 0, Label: "0"}, {Value: 0.25}, {Value: 0.5, Label: "0.5"},
			{Value: 0.75}, {Value: 1, Label: "1"}})
		p.Add(plotter.NewGrid())
		p.Legend.Top, p.Legend.Left = true, true
		p.Legend.XOffs = vg.Points(8)
		for _, g := range goalLines(k) {
			l, err := plotter.NewLine(plotter.XYs{{X: g, Y: 0}, {X: g, Y: 1}})
			if err != nil {
				return err
			}
			l.Color, l.Width, l.Dashes = colourGoal, vg.Points(0.8), []vg.Length{vg.Points(2), vg.Points(2)}
			p.Add(l)
		}
		for _, r := range rep.Rows {
			if r.Case != k || len(r.lags) == 0 {
				continue
			}
			l, err := plotter.NewLine(cdf(r))
			if err != nil {
				return err
			}
			l.Width = vg.Points(1.8)
			l.Color = rowColour(r)
			if r.Computed {
				l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
			}
			p.Add(l)
			p.Legend.Add(legendText(r), l)
		}
		if len(goalLines(k)) > 0 {
			p.Legend.Add("goal", goalThumb())
		}
		plots[i] = []*plot.Plot{p}
	}
	const width, panel = 26 * vg.Centimeter, 13 * vg.Centimeter
	img := vgimg.New(width, panel*vg.Length(len(cases)))
	dc := draw.New(img)
	tiles := draw.Tiles{Rows: len(cases), Cols: 1, PadTop: vg.Points(6), PadBottom: vg.Points(6), PadLeft: vg.Points(6),
		PadRight: vg.Points(12), PadY: vg.Points(18)}
	canvases := plot.Align(plots, tiles, dc)
	for i := range plots {
		plots[i][0].Draw(canvases[i][0])
	}
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	if _, err := (vgimg.PngCanvas{Canvas: img}).WriteTo(f); err != nil {
		_ = f.Close()
		return err
	}
	return f.Close()
}

func (rep *Report) caseTitle(k Case) string {
	c := rep.Config
	switch k {
	case CaseBurst:
		return fmt.Sprintf("burst: %d bookings due at one instant — %s", c.Burst, rep.Backends)
	case CaseBusy:
		return fmt.Sprintf("busy: %d releases/s for %d s while %d confirms/s run — %s", c.BusyRate, c.BusySeconds, c.BusyConfirmRate, rep.Backends)
	}
	return fmt.Sprintf("steady: %d releases/s for %d s (release_at 1/%d s apart) — %s", c.SteadyRate, c.SteadySeconds, c.SteadyRate, rep.Backends)
}

// goalLines are the lag goals of a case, in ms.
func goalLines(k Case) []float64 {
	switch k {
	case CaseBurst:
		return []float64{1000}
	case CaseBusy:
		return []float64{busyP99GoalMs}
	}
	return []float64{50, 250}
}

func goalThumb() plot.Thumbnailer {
	l, _ := plotter.NewLine(plotter.XYs{{X: 1, Y: 0}, {X: 2, Y: 0}})
	l.Color, l.Width, l.Dashes = colourGoal, vg.Points(0.8), []vg.Length{vg.Points(2), vg.Points(2)}
	return l
}

func rowColour(r Row) color.Color {
	switch {
	case r.Computed:
		return colourComputed
	case r.Design == DesignSlotwheel:
		return colourSlotwheel
	case r.Design == DesignAsynq:
		return colourAsynq
	}
	return colourPoll
}

func legendText(r Row) string {
	s := fmt.Sprintf("%s — p50 %s, p99 %s, max %s", r.Label, fmtMs(r.P50Ms), fmtMs(r.P99Ms), fmtMs(r.MaxMs))
	if r.Computed {
		s += " (computed)"
	}
	if r.Early > 0 {
		s += fmt.Sprintf(", %d EARLY", r.Early)
	}
	if r.Released < r.Bookings {
		s += fmt.Sprintf(", %d not released", r.Bookings-r.Released)
	}
	if r.Load != nil {
		s += fmt.Sprintf(" (beside %.0f confirms/s)", r.Load.PerSecond)
	}
	return s
}

// cdf is a row's empirical CDF over all its bookings (so a line that never reaches 1 has
// bookings left unreleased), at most about 600 points.
func cdf(r Row) plotter.XYs {
	n := len(r.lags)
	total := float64(r.Bookings)
	if r.Computed || total < float64(n) {
		total = float64(n) // a computed row's lags are a sample of all its bookings
	}
	step := max(n/600, 1)
	var pts plotter.XYs
	for i := 0; i < n; i += step {
		pts = append(pts, plotter.XY{X: max(ms(r.lags[i]), chartMinMs), Y: float64(i+1) / total})
	}
	pts = append(pts, plotter.XY{X: max(ms(r.lags[n-1]), chartMinMs), Y: float64(n) / total})
	return pts
}

// msTicks labels the decades of a log axis in ms as durations.
func msTicks(maxMs float64) plot.Ticker {
	var ticks []plot.Tick
	for v := chartMinMs; v <= maxMs; v *= 10 {
		ticks = append(ticks, plot.Tick{Value: v, Label: fmtDecade(v)})
		for k := 2.0; k < 10; k++ {
			if v*k <= maxMs {
				ticks = append(ticks, plot.Tick{Value: v * k})
			}
		}
	}
	return plot.ConstantTicks(ticks)
}

func fmtDecade(v float64) string {
	if v < 1000 {
		return fmt.Sprintf("%.0f ms", v)
	}
	return fmt.Sprintf("%.0f s", v/1000)
}
