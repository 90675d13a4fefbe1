package console

import (
	"bytes"
	_ "embed"
	"fmt"
	"html/template"
	"math"
	"net/http"
	"strconv"
	"time"

	"github.com/effectd/effectd/api/client"
	"github.com/effectd/effectd/effectdtype"
)

// The charts of the overview and channel pages: SVG drawn here, from
// GET /v1/charts, by html/template (charts.tmpl), which escapes every value
// written into it; no script, and no inline style (the pages' CSP): the
// lines' colours are classes of style.css. Beside each chart, its numbers in
// a table.

//go:embed charts.tmpl
var chartsText string

var chartsTemplate = template.Must(template.New("charts").Funcs(funcs).Funcs(template.FuncMap{
	"inc": func(n int) int { return n + 1 },
}).Parse(chartsText))

// Chart geometry, in SVG user units.
const (
	chartWidth  = 640
	chartHeight = 170
	chartLeft   = 52 // room for the y axis' labels
	chartRight  = 12
	chartTop    = 10
	chartBottom = 22 // room for the x axis' labels
)

// chartRanges are the ranges a page offers, in order.
var chartRanges = []string{"1h", "24h", "7d"}

// series is one line of a figure.
type series struct {
	Name   string
	Class  string    // the line's class in style.css
	Values []float64 // one a point; NaN where there is no value
	Lines  []string  // the SVG points attribute of each unbroken run
	Dots   []dot     // the points a run of one leaves undrawn
}

// dot is a point of a series drawn alone.
type dot struct{ X, Y float64 }

// figure is one chart: its lines over the chart's points, and its table.
type figure struct {
	ID, Title, Unit, Desc string
	Series                []series
	Max                   float64 // the y axis' top
	Rows                  []figureRow
	Totals                []string // per series: the range's total, or "" where a total means nothing
}

// figureRow is one row of a figure's table: a step where something was.
type figureRow struct {
	At     string
	Values []string
}

// chartMark is an audit entry drawn as a vertical line.
type chartMark struct {
	X                       float64
	At, Actor, Action, Name string
	Policy                  bool // a policy change (otherwise an operator action)
}

// chartsView is what charts.tmpl draws.
type chartsView struct {
	Of      string // "the whole system" or the channel's name
	Range   string
	Ranges  []string
	Base    string // the page's path, for the range links
	Figures []figure
	Marks   []chartMark
	// MarkLines are the marks' SVG lines, drawn once by the template
	// chart-marks and written into each chart: a week's 200 marks escaped
	// once a page, not once a chart.
	MarkLines template.HTML
	Ticks     []tick
	W, H      int
	Left      int
	Right     int // x of the plot's right edge
	Top       int
	Bottom    int // y of the plot's bottom edge
}

// tick is a label on the x axis.
type tick struct {
	X      float64
	Label  string
	Anchor string // start, middle or end: the ends' labels stay inside the chart
}

// charts reads the chart of channel ("": the whole system) over the page's
// ?range= and draws it.
func (c *console) charts(r *http.Request, channel, base string) (template.HTML, error) {
	rangeName := r.URL.Query().Get("range")
	if rangeName == "" {
		rangeName = "1h"
	}
	chart, err := c.client(r).Charts(r.Context(), channel, rangeName)
	if err != nil {
		return "", err
	}
	of := "the whole system"
	if channel != "" {
		of = "channel " + channel
	}
	return renderCharts(drawCharts(chart, of, base))
}

// renderCharts writes v through charts.tmpl: the marks' lines once
// (chart-marks), then the charts, each holding those lines.
func renderCharts(v chartsView) (template.HTML, error) {
	var marks, buf bytes.Buffer
	if err := chartsTemplate.ExecuteTemplate(&marks, "chart-marks", v); err != nil {
		return "", fmt.Errorf("console: charts: marks: %w", err)
	}
	v.MarkLines = template.HTML(marks.String()) // html/template escaped every value, once for all the charts
	if err := chartsTemplate.Execute(&buf, v); err != nil {
		return "", fmt.Errorf("console: charts: %w", err)
	}
	return template.HTML(buf.String()), nil // html/template escaped every value
}

// drawCharts lays out chart's figures, marks and axis.
func drawCharts(chart client.Chart, of, base string) chartsView {
	v := chartsView{Of: of, Range: chart.Range, Ranges: chartRanges, Base: base, W: chartWidth, H: chartHeight,
		Left: chartLeft, Right: chartWidth - chartRight, Top: chartTop, Bottom: chartHeight - chartBottom}
	pts := chart.Points
	count := func(f func(effectdtype.ChartPoint) int64) []float64 {
		out := make([]float64, len(pts))
		for i, p := range pts {
			out[i] = float64(f(p))
		}
		return out
	}
	optional := func(f func(effectdtype.ChartPoint) *float64) []float64 {
		out := make([]float64, len(pts))
		for i, p := range pts {
			out[i] = math.NaN()
			if x := f(p); x != nil {
				out[i] = *x
			}
		}
		return out
	}
	backlog := func(p effectdtype.ChartPoint) *float64 {
		if p.Backlog == nil {
			return nil
		}
		b := float64(*p.Backlog)
		return &b
	}
	step := map[int64]string{60: "per minute", 3600: "per hour"}[chart.StepSeconds]
	v.Figures = []figure{
		v.figure(chart, "throughput", "Throughput", "intents "+step, true, []series{
			{Name: "sent", Class: "s-sent", Values: count(func(p effectdtype.ChartPoint) int64 { return p.Sent })},
			{Name: "failed", Class: "s-failed", Values: count(func(p effectdtype.ChartPoint) int64 { return p.Failed })},
			{Name: "in doubt", Class: "s-doubt", Values: count(func(p effectdtype.ChartPoint) int64 { return p.InDoubt })},
			{Name: "skipped", Class: "s-skipped", Values: count(func(p effectdtype.ChartPoint) int64 { return p.Skipped })},
		}),
		v.figure(chart, "latency", "Latency, enqueue commit to provider answer", "milliseconds", false, []series{
			{Name: "p50", Class: "s-sent", Values: optional(func(p effectdtype.ChartPoint) *float64 { return p.LatencyP50Ms })},
			{Name: "p99", Class: "s-failed", Values: optional(func(p effectdtype.ChartPoint) *float64 { return p.LatencyP99Ms })},
		}),
		v.figure(chart, "backlog", "Backlog", "PENDING intents, the most sampled in a step", false, []series{
			{Name: "backlog", Class: "s-sent", Values: optional(backlog)},
		}),
		v.figure(chart, "oldest-due", "Oldest due intent", "seconds waited, the most sampled in a step", false, []series{
			{Name: "oldest due age", Class: "s-doubt", Values: optional(func(p effectdtype.ChartPoint) *float64 { return p.OldestDueSeconds })},
		}),
		v.figure(chart, "delivery", "Delivery outcomes", "deliveries "+step, true, []series{
			{Name: "accepted", Class: "s-skipped", Values: count(func(p effectdtype.ChartPoint) int64 { return p.Accepted })},
			{Name: "delivered", Class: "s-sent", Values: count(func(p effectdtype.ChartPoint) int64 { return p.Delivered })},
			{Name: "undelivered", Class: "s-failed", Values: count(func(p effectdtype.ChartPoint) int64 { return p.Undelivered })},
		}),
		v.figure(chart, "errors", "Provider errors and back-offs", "answers "+step, true, []series{
			{Name: "provider errors", Class: "s-failed", Values: count(func(p effectdtype.ChartPoint) int64 { return p.ProviderErrors })},
			{Name: "back-offs", Class: "s-doubt", Values: count(func(p effectdtype.ChartPoint) int64 { return p.Backoffs })},
		}),
	}
	v.Marks, v.Ticks = v.marks(chart), v.ticks(chart)
	return v
}

// x is the horizontal position of time at in the plot.
func (v chartsView) x(chart client.Chart, at time.Time) float64 {
	span := chart.To.Sub(chart.From).Seconds()
	return float64(v.Left) + float64(v.Right-v.Left)*at.Sub(chart.From).Seconds()/span
}

// figure lays out one chart of the series: each point at the middle of its
// step, the y axis from 0 to the largest value; its table has a row for each
// step with a value, and, where summed says the values add up, the range's
// totals.
func (v chartsView) figure(chart client.Chart, id, title, unit string, summed bool, ss []series) figure {
	f := figure{ID: id, Title: title, Unit: unit, Series: ss, Max: 1}
	for _, s := range ss {
		for _, x := range s.Values {
			if !math.IsNaN(x) {
				f.Max = max(f.Max, x)
			}
		}
	}
	half := time.Duration(chart.StepSeconds) * time.Second / 2
	for si := range f.Series {
		s := &f.Series[si]
		var run []dot
		flush := func() {
			if len(run) == 1 {
				s.Dots = append(s.Dots, run[0])
			} else if len(run) > 1 {
				var points []byte
				for _, d := range run {
					points = fmt.Appendf(points, "%.1f,%.1f ", d.X, d.Y)
				}
				s.Lines = append(s.Lines, string(points))
			}
			run = run[:0]
		}
		for i, val := range s.Values {
			if math.IsNaN(val) {
				flush()
				continue
			}
			run = append(run, dot{X: math.Round(v.x(chart, chart.Points[i].At.Add(half))*10) / 10,
				Y: math.Round((float64(v.Bottom)-float64(v.Bottom-v.Top)*val/f.Max)*10) / 10})
		}
		flush()
	}
	totals := make([]float64, len(ss))
	for i, p := range chart.Points {
		row := figureRow{At: pointTime(chart, p.At), Values: make([]string, len(ss))}
		some := false
		for si, s := range ss {
			val := s.Values[i]
			if math.IsNaN(val) {
				row.Values[si] = "–"
				continue
			}
			some = some || val != 0
			totals[si] += val
			row.Values[si] = strconv.FormatFloat(val, 'f', -1, 64)
		}
		if some {
			f.Rows = append(f.Rows, row)
		}
	}
	if summed {
		for _, t := range totals {
			f.Totals = append(f.Totals, strconv.FormatFloat(t, 'f', -1, 64))
		}
	}
	f.Desc = fmt.Sprintf("%s of %s, %s, over the last %s: %d steps with a value; the highest %s.",
		title, v.Of, unit, chart.Range, len(f.Rows), strconv.FormatFloat(f.Max, 'f', -1, 64))
	return f
}

// pointTime is how a table names a step: UTC, with the date over a week.
func pointTime(chart client.Chart, at time.Time) string {
	if chart.Range == "7d" {
		return at.UTC().Format("01-02 15:04")
	}
	return at.UTC().Format("15:04")
}

// marks places the chart's audit entries, oldest first.
func (v chartsView) marks(chart client.Chart) []chartMark {
	out := make([]chartMark, 0, len(chart.Marks))
	for i := len(chart.Marks) - 1; i >= 0; i-- {
		m := chart.Marks[i]
		name := m.Channel
		if m.IntentID != nil {
			name = fmt.Sprintf("%s intent %d", m.Channel, *m.IntentID)
		}
		out = append(out, chartMark{X: v.x(chart, m.At), At: m.At.UTC().Format("2006-01-02 15:04:05Z"), Actor: m.Actor,
			Action: m.Action, Name: name, Policy: m.Action == "channel.policy"})
	}
	return out
}

// ticks labels the x axis at its start, its quarters and its end.
func (v chartsView) ticks(chart client.Chart) []tick {
	var out []tick
	for i := range 5 {
		at := chart.From.Add(chart.To.Sub(chart.From) * time.Duration(i) / 4)
		anchor := map[int]string{0: "start", 4: "end"}[i]
		if anchor == "" {
			anchor = "middle"
		}
		out = append(out, tick{X: v.x(chart, at), Label: pointTime(chart, at), Anchor: anchor})
	}
	return out
}
