// Package chart draws an eval report as a PNG with gonum/plot: pass rate
// (y) against mean tokens per rollout (x), one point per configuration with
// its 95% Wilson interval as an error bar, each rollout's score as a faint
// dot, a title, labelled axes and a legend naming the configurations. It is
// the only package that imports gonum/plot; the numbers it draws are the
// ones Points returns, which `apodex eval show` prints as a table.
package chart

import (
	"fmt"
	"image/color"
	"io"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgimg"

	"github.com/apodex/apodex/internal/eval"
)

// Palette is each configuration's colour, in suite order (cycling).
var Palette = []struct {
	Name string
	C    color.RGBA
}{
	{"blue", color.RGBA{31, 119, 180, 255}}, {"orange", color.RGBA{255, 127, 14, 255}},
	{"green", color.RGBA{44, 160, 44, 255}}, {"red", color.RGBA{214, 39, 40, 255}},
	{"purple", color.RGBA{148, 103, 189, 255}}, {"brown", color.RGBA{140, 86, 75, 255}},
}

// Point is one configuration as drawn: its colour, x, y and y's interval.
type Point struct {
	Config   string
	Colour   string
	Rollouts int
	Tokens   float64 // x: mean tokens per rollout
	PassRate float64 // y
	Low      float64 // the 95% interval of y
	High     float64
	c        color.RGBA
}

// Points are the configurations the plot draws, in suite order; a
// configuration without rollouts is left out.
func Points(rep eval.Report) []Point {
	var ps []Point
	for i, c := range rep.Configs {
		if c.Rollouts == 0 {
			continue
		}
		ps = append(ps, Point{Config: c.Name, Colour: Palette[i%len(Palette)].Name, Rollouts: c.Rollouts,
			Tokens: c.Mean.Tokens, PassRate: c.PassRate, Low: c.Interval[0], High: c.Interval[1], c: Palette[i%len(Palette)].C})
	}
	return ps
}

// Write draws the report and its rollouts' scores to w as a PNG.
func Write(w io.Writer, rep eval.Report, results []eval.Result) error {
	p := plot.New()
	p.Title.Text = fmt.Sprintf("eval %s (%s): pass rate against tokens", rep.ID, rep.Suite)
	p.X.Label.Text = "mean tokens per rollout"
	p.Y.Label.Text = "pass rate, 95% Wilson interval"
	p.Title.TextStyle.Font.Size = vg.Points(14)
	p.Title.Padding = vg.Points(6)
	// Room above 1 keeps the legend off the points.
	p.Y.Min, p.Y.Max = -0.05, 1.05+0.09*float64(len(rep.Configs)+1)
	p.Y.Tick.Marker = plot.ConstantTicks{{Value: 0, Label: "0"}, {Value: 0.25, Label: "0.25"}, {Value: 0.5, Label: "0.5"}, {Value: 0.75, Label: "0.75"}, {Value: 1, Label: "1"}}
	p.X.Min = 0
	p.Add(plotter.NewGrid())
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs, p.Legend.YOffs = vg.Points(8), vg.Points(-4)
	p.Legend.Padding = vg.Points(3)
	for i, c := range rep.Configs {
		col := Palette[i%len(Palette)].C
		var dots plotter.XYs
		n := 0
		for _, r := range results {
			if r.Config != c.Name {
				continue
			}
			dots = append(dots, plotter.XY{X: float64(r.Tokens), Y: r.Correct + (float64(n%7)-3)*0.008})
			n++
		}
		if len(dots) > 0 {
			s, err := plotter.NewScatter(dots)
			if err != nil {
				return fmt.Errorf("chart: %s rollouts: %w", c.Name, err)
			}
			faint := color.NRGBA{col.R, col.G, col.B, 90}
			s.GlyphStyle = draw.GlyphStyle{Color: faint, Radius: vg.Points(2.5), Shape: draw.CircleGlyph{}}
			p.Add(s)
		}
	}
	for _, pt := range Points(rep) {
		col := pt.c
		xy := plotter.XYs{{X: pt.Tokens, Y: pt.PassRate}}
		s, err := plotter.NewScatter(xy)
		if err != nil {
			return fmt.Errorf("chart: %s: %w", pt.Config, err)
		}
		s.GlyphStyle = draw.GlyphStyle{Color: col, Radius: vg.Points(5), Shape: draw.BoxGlyph{}}
		bars, err := plotter.NewYErrorBars(struct {
			plotter.XYs
			plotter.YErrors
		}{xy, plotter.YErrors{{Low: pt.PassRate - pt.Low, High: pt.High - pt.PassRate}}})
		if err != nil {
			return fmt.Errorf("chart: %s interval: %w", pt.Config, err)
		}
		bars.LineStyle.Color, bars.LineStyle.Width = col, vg.Points(1.5)
		p.Add(bars, s)
		p.Legend.Add(fmt.Sprintf("%s (n=%d)", pt.Config, pt.Rollouts), s)
	}
	if len(results) > 0 {
		key, err := plotter.NewScatter(plotter.XYs{})
		if err != nil {
			return fmt.Errorf("chart: %w", err)
		}
		key.GlyphStyle = draw.GlyphStyle{Color: color.NRGBA{120, 120, 120, 120}, Radius: vg.Points(2.5), Shape: draw.CircleGlyph{}}
		p.Legend.Add("one rollout's score (0 or 1)", key)
	}
	p.X.Max *= 1.08
	c := vgimg.New(7*vg.Inch, 4.5*vg.Inch)
	p.Draw(draw.New(c))
	png := vgimg.PngCanvas{Canvas: c}
	if _, err := png.WriteTo(w); err != nil {
		return fmt.Errorf("chart: %w", err)
	}
	return nil
}
