package eval

import (
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"math"
)

// Palette is the plot's colour of each configuration, in suite order
// (cycling); `eval show --plot` names them.
var Palette = []struct {
	Name string
	C    color.RGBA
}{
	{"blue", color.RGBA{31, 119, 180, 255}}, {"orange", color.RGBA{255, 127, 14, 255}},
	{"green", color.RGBA{44, 160, 44, 255}}, {"red", color.RGBA{214, 39, 40, 255}},
	{"purple", color.RGBA{148, 103, 189, 255}}, {"brown", color.RGBA{140, 86, 75, 255}},
}

// Plot draws score (correct, y) against tokens (x) as a PNG: one small
// dot per rollout (jittered so ties show), and per configuration a square
// at its mean tokens and pass rate with its 95% interval as a bar. Axis
// ticks are labelled (tokens in thousands on x).
func Plot(w io.Writer, p *Plan, results []Result) error {
	const W, H, left, right, top, bottom = 720, 480, 60, 20, 20, 40
	img := image.NewRGBA(image.Rect(0, 0, W, H))
	fill(img, img.Bounds(), color.RGBA{255, 255, 255, 255})
	maxTok := 1.0
	for _, r := range results {
		maxTok = math.Max(maxTok, float64(r.Tokens))
	}
	maxTok = niceCeil(maxTok * 1.05)
	px := func(tok float64) int { return left + int(tok/maxTok*float64(W-left-right)) }
	py := func(score float64) int { return H - bottom - int(score*float64(H-top-bottom)) }
	grey, axis := color.RGBA{225, 225, 225, 255}, color.RGBA{60, 60, 60, 255}
	for i := 0; i <= 4; i++ {
		y := py(float64(i) / 4)
		fill(img, image.Rect(left, y, W-right, y+1), grey)
		text(img, 8, y-3, fmt.Sprintf("%.2f", float64(i)/4), axis)
		x := px(maxTok * float64(i) / 4)
		fill(img, image.Rect(x, top, x+1, H-bottom), grey)
		label := fmt.Sprintf("%.3gk", maxTok*float64(i)/4/1000)
		text(img, min(x-8, W-8*len(label)), H-bottom+8, label, axis)
	}
	fill(img, image.Rect(left, top, left+1, H-bottom+1), axis)
	fill(img, image.Rect(left, H-bottom, W-right, H-bottom+1), axis)
	rep := Summarize(p, results)
	for ci, c := range rep.Configs {
		col := Palette[ci%len(Palette)].C
		n := 0
		for _, r := range results {
			if r.Config != c.Name {
				continue
			}
			jitter := (float64(n%7) - 3) * 0.012
			n++
			dot(img, px(float64(r.Tokens)), py(r.Correct*0.96+0.02+jitter), 3, col)
		}
		if c.Rollouts == 0 {
			continue
		}
		x := px(c.Mean.Tokens)
		fill(img, image.Rect(x-1, py(c.Interval[1]), x+2, py(c.Interval[0])+1), col)
		y := py(c.PassRate)
		fill(img, image.Rect(x-6, y-6, x+7, y+7), col)
		fill(img, image.Rect(W-right-20-ci*18, top+4, W-right-8-ci*18, top+16), col) // legend, suite order right to left
	}
	return png.Encode(w, img)
}

func niceCeil(x float64) float64 {
	e := math.Pow(10, math.Floor(math.Log10(x)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*e >= x {
			return m * e
		}
	}
	return 10 * e
}

func fill(img *image.RGBA, r image.Rectangle, c color.RGBA) {
	r = r.Intersect(img.Bounds())
	for y := r.Min.Y; y < r.Max.Y; y++ {
		for x := r.Min.X; x < r.Max.X; x++ {
			img.SetRGBA(x, y, c)
		}
	}
}

func dot(img *image.RGBA, cx, cy, r int, c color.RGBA) {
	for y := -r; y <= r; y++ {
		for x := -r; x <= r; x++ {
			if x*x+y*y <= r*r && image.Pt(cx+x, cy+y).In(img.Bounds()) {
				img.SetRGBA(cx+x, cy+y, c)
			}
		}
	}
}

// glyphs is a 3×5 bitmap font for tick labels.
var glyphs = map[rune][5]string{
	'0': {"###", "#.#", "#.#", "#.#", "###"}, '1': {".#.", "##.", ".#.", ".#.", "###"},
	'2': {"###", "..#", "###", "#..", "###"}, '3': {"###", "..#", "###", "..#", "###"},
	'4': {"#.#", "#.#", "###", "..#", "..#"}, '5': {"###", "#..", "###", "..#", "###"},
	'6': {"###", "#..", "###", "#.#", "###"}, '7': {"###", "..#", "..#", "..#", "..#"},
	'8': {"###", "#.#", "###", "#.#", "###"}, '9': {"###", "#.#", "###", "..#", "###"},
	'.': {"...", "...", "...", "...", ".#."}, 'k': {"#..", "#.#", "##.", "#.#", "#.#"},
	'e': {"###", "#.#", "###", "#..", "###"}, '+': {"...", ".#.", "###", ".#.", "..."},
}

// text draws s at (x, y) in the 3×5 font, scaled ×2.
func text(img *image.RGBA, x, y int, s string, c color.RGBA) {
	for _, ch := range s {
		g, ok := glyphs[ch]
		if ok {
			for gy, row := range g {
				for gx, b := range row {
					if b == '#' {
						fill(img, image.Rect(x+2*gx, y+2*gy, x+2*gx+2, y+2*gy+2), c)
					}
				}
			}
		}
		x += 8
	}
}
