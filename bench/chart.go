package bench

import (
	"bytes"
	"fmt"
	"image/color"
	"math"
	"os"
	"path/filepath"
	"strconv"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
	"gonum.org/v1/plot/vg/vgsvg"
)

// Chart file names, written by WriteCharts beside docs/PERFORMANCE.md.
const (
	// HistoryChart plots the history bytes of one turn against the
	// conversation's length.
	HistoryChart = "turns-history.svg"
	// TimeChart plots the time of one turn against the conversation's
	// length.
	TimeChart = "turns-time.svg"
)

// patternStyle is how a pattern is drawn.
var patternStyle = map[string]struct {
	color color.Color
	shape draw.GlyphDrawer
}{
	PatternSessionflow: {color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff}, draw.CircleGlyph{}},
	PatternSample:      {color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff}, draw.TriangleGlyph{}},
}

// Names of the tool-round series of the charts.
const (
	roundSeriesSessionflow = "sessionflow tool round"
	roundSeriesSample      = "agent sample tool round"
)

// roundSeries returns a pattern's tool rounds of one call: the
// conversation length and value(p), for the points that ran.
func roundSeries(tr *TurnResults, pattern string, value func(RoundPoint) float64) plotter.XYs {
	var xys plotter.XYs
	if tr.Rounds == nil {
		return nil
	}
	for _, p := range tr.Rounds.Points[pattern] {
		if p.Err != "" || p.Measured == 0 || p.Calls != 1 || p.Messages <= 0 {
			continue
		}
		xys = append(xys, plotter.XY{X: float64(p.Messages), Y: value(p)})
	}
	return xys
}

// chartSeries returns a pattern's points of the size measurements: the
// conversation length and value(p), for the points that ran.
func chartSeries(tr *TurnResults, pattern string, value func(TurnPoint) float64) plotter.XYs {
	var xys plotter.XYs
	for _, p := range tr.BySize[pattern] {
		if p.Err != "" || p.Messages <= 0 {
			continue
		}
		xys = append(xys, plotter.XY{X: float64(p.Messages), Y: value(p)})
	}
	return xys
}

// byteTicks are log-scale ticks labelled in decimal byte units.
type byteTicks struct{}

// Ticks implements plot.Ticker.
func (byteTicks) Ticks(lo, hi float64) []plot.Tick {
	ticks := plot.LogTicks{Prec: -1}.Ticks(lo, hi)
	for i, t := range ticks {
		if t.Label != "" {
			ticks[i].Label = decimalBytes(t.Value)
		}
	}
	return ticks
}

// decimalBytes labels a byte count in B, kB, MB or GB (powers of 1000).
func decimalBytes(v float64) string {
	units := []string{"B", "kB", "MB", "GB"}
	i := 0
	for v >= 1000 && i < len(units)-1 {
		v /= 1000
		i++
	}
	return strconv.FormatFloat(v, 'g', 3, 64) + " " + units[i]
}

// Charts renders the two SVG charts of the turn measurements, by file name.
func Charts(tr *TurnResults) (map[string][]byte, error) {
	out := map[string][]byte{}
	specs := []struct {
		file, title, y string
		logY           bool
		value          func(TurnPoint) float64
		round          func(RoundPoint) float64
	}{
		{HistoryChart, "Workflow history added by one turn and one tool round", "history bytes per turn or round (log scale)", true,
			func(p TurnPoint) float64 { return float64(p.HistoryBytes) },
			func(p RoundPoint) float64 { return float64(p.HistoryBytes) }},
		{TimeChart, "Time of one turn and one tool round (zero-latency model)", "median time per turn or round (ms)", false,
			func(p TurnPoint) float64 { return float64(p.Time.Median.Microseconds()) / 1000 },
			func(p RoundPoint) float64 { return float64(p.Time.Median.Microseconds()) / 1000 }},
	}
	for _, s := range specs {
		p := plot.New()
		p.Title.Text = s.title
		p.X.Label.Text = "conversation length (messages, log scale)"
		p.Y.Label.Text = s.y
		p.X.Scale = plot.LogScale{}
		p.X.Tick.Marker = plot.LogTicks{Prec: -1}
		if s.logY {
			p.Y.Scale = plot.LogScale{}
			p.Y.Tick.Marker = byteTicks{}
		} else {
			p.Y.Min = 0
		}
		p.Title.Padding = vg.Points(8)
		p.Legend.Top = true
		p.Legend.Left = true
		p.Legend.XOffs = vg.Points(60)
		p.Legend.YOffs = -vg.Points(30)
		p.Legend.Padding = vg.Points(2)
		p.Add(plotter.NewGrid())
		drawn := 0
		xmin, xmax, ymax := math.Inf(1), 0.0, 0.0
		ymin := math.Inf(1)
		series := []struct {
			name, pattern string
			xys           plotter.XYs
			dashed        bool
		}{
			{PatternSessionflow, PatternSessionflow, chartSeries(tr, PatternSessionflow, s.value), false},
			{PatternSample, PatternSample, chartSeries(tr, PatternSample, s.value), false},
			{roundSeriesSessionflow, PatternSessionflow, roundSeries(tr, PatternSessionflow, s.round), true},
			{roundSeriesSample, PatternSample, roundSeries(tr, PatternSample, s.round), true},
		}
		for _, se := range series {
			xys, pattern := se.xys, se.pattern
			if len(xys) == 0 {
				continue
			}
			for _, xy := range xys {
				xmin, xmax = math.Min(xmin, xy.X), math.Max(xmax, xy.X)
				ymin, ymax = math.Min(ymin, xy.Y), math.Max(ymax, xy.Y)
			}
			line, points, err := plotter.NewLinePoints(xys)
			if err != nil {
				return nil, fmt.Errorf("%s: %s: %w", s.file, pattern, err)
			}
			st := patternStyle[pattern]
			line.Color = st.color
			line.Width = vg.Points(1.5)
			points.Color = st.color
			points.Shape = st.shape
			points.Radius = vg.Points(3)
			if se.dashed {
				line.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
				points.Shape = draw.BoxGlyph{}
			}
			p.Add(line, points)
			p.Legend.Add(se.name, line, points)
			drawn++
		}
		if drawn == 0 {
			return nil, fmt.Errorf("%s: no pattern has points to draw", s.file)
		}
		// Room around the points on the log axes, so that the end labels
		// and the markers stay inside the canvas.
		p.X.Min, p.X.Max = xmin/1.5, xmax*1.5
		if s.logY && ymin > 0 {
			p.Y.Min, p.Y.Max = ymin/1.5, ymax*1.5
		} else {
			p.Y.Max = ymax * 1.1
		}
		c := vgsvg.New(6*vg.Inch, 4*vg.Inch)
		p.Draw(draw.New(c))
		var buf bytes.Buffer
		if _, err := c.WriteTo(&buf); err != nil {
			return nil, fmt.Errorf("%s: %w", s.file, err)
		}
		out[s.file] = buf.Bytes()
	}
	return out, nil
}

// WriteCharts writes the charts of Charts into dir.
func WriteCharts(dir string, tr *TurnResults) ([]string, error) {
	charts, err := Charts(tr)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, name := range []string{HistoryChart, TimeChart} {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, charts[name], 0o644); err != nil {
			return nil, fmt.Errorf("writing %s: %w", path, err)
		}
		files = append(files, path)
	}
	return files, nil
}
