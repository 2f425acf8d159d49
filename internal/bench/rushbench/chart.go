package rushbench

import (
	"fmt"
	"image/color"
	"time"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
)

// Colours of the designs, as releasebench draws slotwheel and its first anchor.
var designColour = map[Design]color.Color{
	DesignSlotwheel: color.RGBA{R: 0x1f, G: 0x5f, B: 0xbf, A: 0xff},
	DesignSQL:       color.RGBA{R: 0xe0, G: 0x70, B: 0x10, A: 0xff},
}

var goalColour = color.RGBA{R: 0xc0, G: 0x20, B: 0x20, A: 0xff}

// WriteChart draws the rush of every design on one chart — the fraction of the units sold (solid)
// and of the clients answered (dashed) against the time since the gate — with the sold-out goal
// marked, and writes it as a PNG to path.
func (rep *Report) WriteChart(path string) error {
	p := plot.New()
	c := rep.Config
	p.Title.Text = fmt.Sprintf("rush: %d clients for %d units at one gate — %s", c.Clients, c.Units, rep.Backends)
	p.X.Label.Text = "seconds since the gate"
	p.Y.Label.Text = "fraction of units sold (solid) and of clients answered (dashed)"
	// Room above 1 for the legend, so that no line runs under it.
	p.Y.Min, p.Y.Max = 0, 1.4
	p.X.Min = 0
	p.Add(plotter.NewGrid())
	p.Legend.Top, p.Legend.Left = true, true
	p.Legend.XOffs = vg.Points(8)
	drawn := false
	for _, r := range rep.Rows {
		if r.Wave != WaveRush || r.Failed {
			continue
		}
		for _, s := range []struct {
			at    []time.Duration
			total int
			text  string
			dash  bool
		}{
			{r.sold, c.Units * r.Runs, fmt.Sprintf("%s: units sold — sold out %s", r.Label, fmtMsOpt(r.SoldOutMs)), false},
			{r.answered, c.Clients * r.Runs, fmt.Sprintf("%s: clients answered — %.0f/s, p99 %s", r.Label, r.AnswersPerSecond, fmtDur(r.P99Ms)), true},
		} {
			if len(s.at) == 0 {
				continue
			}
			l, err := plotter.NewLine(cumulative(s.at, s.total))
			if err != nil {
				return err
			}
			l.Color, l.Width = designColour[r.Design], vg.Points(1.8)
			if s.dash {
				l.Dashes = []vg.Length{vg.Points(6), vg.Points(3)}
			}
			p.Add(l)
			p.Legend.Add(s.text, l)
			drawn = true
		}
	}
	if !drawn {
		return fmt.Errorf("chart: nothing was measured")
	}
	if sq := rep.row(DesignSQL, WaveRush); sq != nil && sq.SoldOutMs != nil {
		at := *sq.SoldOutMs / 2000
		l, err := plotter.NewLine(plotter.XYs{{X: at, Y: 0}, {X: at, Y: 1}})
		if err != nil {
			return err
		}
		l.Color, l.Width, l.Dashes = goalColour, vg.Points(0.8), []vg.Length{vg.Points(2), vg.Points(2)}
		p.Add(l)
		p.Legend.Add("goal: slotwheel sold out by ½ of plain SQL's time", l)
	}
	return p.Save(26*vg.Centimeter, 15*vg.Centimeter, path)
}

// cumulative is the fraction of total that arrived by each instant of sorted, from the gate, in
// about 600 points at most.
func cumulative(sorted []time.Duration, total int) plotter.XYs {
	pts := plotter.XYs{{X: 0, Y: 0}}
	step := max(len(sorted)/600, 1)
	for i := 0; i < len(sorted); i += step {
		pts = append(pts, plotter.XY{X: sorted[i].Seconds(), Y: float64(i+1) / float64(total)})
	}
	last := len(sorted) - 1
	return append(pts, plotter.XY{X: sorted[last].Seconds(), Y: float64(last+1) / float64(total)})
}
