package loadtest

import (
	"fmt"
	"html/template"
	"io"
	"math"
	"path/filepath"
	"strings"
)

// The HTML report is one file with no outside resource: the charts are
// inline SVG drawn here, the style is inline, there is no script.

// series is one line of a line chart.
type series struct {
	name  string
	color string
	width float64
	x, y  []float64
}

var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}

// niceStep returns a round tick step giving about n ticks over span.
func niceStep(span float64, n int) float64 {
	if span <= 0 || math.IsNaN(span) || math.IsInf(span, 0) {
		return 1
	}
	raw := span / float64(n)
	mag := math.Pow(10, math.Floor(math.Log10(raw)))
	for _, m := range []float64{1, 2, 2.5, 5, 10} {
		if m*mag >= raw {
			return m * mag
		}
	}
	return 10 * mag
}

func fmtNum(v float64) string {
	switch a := math.Abs(v); {
	case a >= 1e6:
		return trimZero(fmt.Sprintf("%.1f", v/1e6)) + "M"
	case a >= 1e4:
		return trimZero(fmt.Sprintf("%.1f", v/1e3)) + "k"
	case a >= 100 || v == math.Trunc(v):
		return fmt.Sprintf("%.0f", v)
	default:
		return trimZero(fmt.Sprintf("%.2f", v))
	}
}

func trimZero(s string) string {
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

const (
	chartW, chartH                 = 1000, 360
	padL, padR, padT, padB float64 = 70, 20, 20, 50
)

// lineChart draws series as an SVG line chart.
func lineChart(title, xLabel, yLabel string, ss []series) template.HTML {
	var b strings.Builder
	xMax, yMax := 0.0, 0.0
	for _, s := range ss {
		for i := range s.x {
			xMax = max(xMax, s.x[i])
			yMax = max(yMax, s.y[i])
		}
	}
	if xMax <= 0 {
		xMax = 1
	}
	if yMax <= 0 {
		yMax = 1
	}
	xStep, yStep := niceStep(xMax, 10), niceStep(yMax, 6)
	xMax = math.Ceil(xMax/xStep) * xStep
	yMax = math.Ceil(yMax/yStep) * yStep
	pw, ph := chartW-padL-padR, chartH-padT-padB
	px := func(x float64) float64 { return padL + x/xMax*pw }
	py := func(y float64) float64 { return padT + ph - y/yMax*ph }
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="100%%" role="img" aria-label="%s">`, chartW, chartH, template.HTMLEscapeString(title))
	fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="#fff" stroke="#ccc"/>`, padL, padT, pw, ph)
	for y := 0.0; y <= yMax+yStep/2; y += yStep {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#eee"/>`, padL, padL+pw, py(y), py(y))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" font-size="12" fill="#444">%s</text>`, padL-6, py(y)+4, fmtNum(y))
	}
	for x := 0.0; x <= xMax+xStep/2; x += xStep {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#eee"/>`, px(x), px(x), padT, padT+ph)
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="12" fill="#444">%s</text>`, px(x), padT+ph+16, fmtNum(x))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="13">%s</text>`, padL+pw/2, chartH-8.0, template.HTMLEscapeString(xLabel))
	fmt.Fprintf(&b, `<text transform="translate(16 %.1f) rotate(-90)" text-anchor="middle" font-size="13">%s</text>`, padT+ph/2, template.HTMLEscapeString(yLabel))
	for _, s := range ss {
		if len(s.x) == 0 {
			continue
		}
		var pts strings.Builder
		for i := range s.x {
			fmt.Fprintf(&pts, "%.1f,%.1f ", px(s.x[i]), py(s.y[i]))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="%.1f" stroke-linejoin="round" points="%s"/>`, s.color, s.width, strings.TrimSpace(pts.String()))
	}
	b.WriteString(`</svg><div class="legend">`)
	for _, s := range ss {
		fmt.Fprintf(&b, `<span><svg width="28" height="10"><line x1="0" x2="28" y1="5" y2="5" stroke="%s" stroke-width="%.1f"/></svg> %s</span>`,
			s.color, max(s.width, 2), template.HTMLEscapeString(s.name))
	}
	b.WriteString(`</div>`)
	return template.HTML(b.String())
}

// barChart draws the histogram of d as SVG bars, one per bucket.
func barChart(title string, d Distribution) template.HTML {
	var b strings.Builder
	n := len(d.Histogram)
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 %d %d" width="100%%" role="img" aria-label="%s">`, chartW, chartH, template.HTMLEscapeString(title))
	pw, ph := chartW-padL-padR, chartH-padT-padB
	fmt.Fprintf(&b, `<rect x="%.0f" y="%.0f" width="%.0f" height="%.0f" fill="#fff" stroke="#ccc"/>`, padL, padT, pw, ph)
	if n == 0 {
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">no data</text></svg>`, padL+pw/2, padT+ph/2)
		return template.HTML(b.String())
	}
	var yMax float64
	for _, k := range d.Histogram {
		yMax = max(yMax, float64(k.Count))
	}
	yStep := niceStep(yMax, 6)
	yMax = math.Ceil(yMax/yStep) * yStep
	py := func(y float64) float64 { return padT + ph - y/yMax*ph }
	for y := 0.0; y <= yMax+yStep/2; y += yStep {
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="#eee"/>`, padL, padL+pw, py(y), py(y))
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="end" font-size="12" fill="#444">%s</text>`, padL-6, py(y)+4, fmtNum(y))
	}
	slot := pw / float64(n)
	lo := 0.0
	for i, k := range d.Histogram {
		x := padL + float64(i)*slot
		y := py(float64(k.Count))
		label := "≤" + fmtNum(k.UpperMS)
		if math.IsInf(k.UpperMS, 1) {
			label = ">" + fmtNum(lo)
		}
		lo = k.UpperMS
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="%.1f" height="%.1f" fill="#1f77b4"><title>%s ms: %d rows</title></rect>`,
			x+slot*0.1, y, slot*0.8, padT+ph-y, label, k.Count)
		if k.Count > 0 {
			fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="11" fill="#222">%d</text>`, x+slot/2, y-4, k.Count)
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="12" fill="#444">%s</text>`, x+slot/2, padT+ph+16, label)
	}
	// Percentile markers: placed by bucket, interpolated on a log scale.
	for k, m := range []struct {
		name string
		v    float64
		c    string
	}{{"p50", d.P50, "#2ca02c"}, {"p95", d.P95, "#ff7f0e"}, {"p99", d.P99, "#d62728"}} {
		x := histX(d.Histogram, m.v, slot)
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%.1f" y2="%.1f" stroke="%s" stroke-width="2" stroke-dasharray="6 4"/>`, x, x, padT, padT+ph, m.c)
		// Labels stacked, on the side with room.
		tx, anchor := x+4, "start"
		if x > padL+pw*0.75 {
			tx, anchor = x-4, "end"
		}
		fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" font-size="12" text-anchor="%s" fill="%s" stroke="#fff" stroke-width="3" paint-order="stroke">%s %s ms</text>`,
			tx, padT+14+16*float64(k), anchor, m.c, m.name, fmtNum(m.v))
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle" font-size="13">milliseconds (bucket upper bound)</text>`, padL+pw/2, chartH-8.0)
	fmt.Fprintf(&b, `<text transform="translate(16 %.1f) rotate(-90)" text-anchor="middle" font-size="13">rows</text>`, padT+ph/2)
	b.WriteString(`</svg>`)
	return template.HTML(b.String())
}

// histX is the x of value v over the bars of h.
func histX(h []Bucket, v, slot float64) float64 {
	lo := 0.0
	for i, k := range h {
		if v <= k.UpperMS {
			frac := 0.5
			if lo > 0 && !math.IsInf(k.UpperMS, 1) && v > lo {
				frac = math.Log(v/lo) / math.Log(k.UpperMS/lo)
			} else if lo == 0 && !math.IsInf(k.UpperMS, 1) {
				frac = v / k.UpperMS
			}
			return padL + (float64(i)+frac)*slot
		}
		lo = k.UpperMS
	}
	return padL + float64(len(h))*slot
}

// throughputSeries turns the timeline into rows/s of the table and
// records/s served to each process.
func throughputSeries(r *Report) []series {
	rows := series{name: "table growth (rows/s, COUNT(*) every sample)", color: "#000", width: 2.5}
	per := make([]series, len(r.Processes))
	for i, p := range r.Processes {
		per[i] = series{name: fmt.Sprintf("process %d %s: records served/s", p.Index, p.Mode), color: palette[i%len(palette)], width: 1.2}
	}
	for k, s := range r.Timeline {
		if k == 0 {
			continue
		}
		prev := r.Timeline[k-1]
		dt := s.T - prev.T
		if dt <= 0 {
			continue
		}
		rows.x = append(rows.x, s.T)
		rows.y = append(rows.y, max(s.RowsPerSecond, 0))
		for i := range per {
			if i < len(s.Served) && i < len(prev.Served) {
				per[i].x = append(per[i].x, s.T)
				per[i].y = append(per[i].y, float64(s.Served[i]-prev.Served[i])/dt)
			}
		}
	}
	return append([]series{rows}, per...)
}

func mib(kib int64) string { return fmt.Sprintf("%.1f", float64(kib)/1024) }

var page = template.Must(template.New("report").Funcs(template.FuncMap{
	"num": fmtNum,
	"f1":  func(v float64) string { return fmt.Sprintf("%.1f", v) },
	"f0":  func(v float64) string { return fmt.Sprintf("%.0f", v) },
	"mib": mib,
	"base": func(p string) string {
		if p == "" {
			return ""
		}
		return filepath.Base(p)
	},
}).Parse(`<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>erpsync load test</title>
<style>
body { font-family: system-ui, -apple-system, "DejaVu Sans", sans-serif; margin: 24px; color: #222; max-width: 1100px; }
h1 { margin-bottom: 4px; }
.ok { color: #fff; background: #2ca02c; padding: 2px 10px; border-radius: 4px; }
.bad { color: #fff; background: #d62728; padding: 2px 10px; border-radius: 4px; }
table { border-collapse: collapse; margin: 8px 0 20px; font-size: 13px; }
th, td { border: 1px solid #ccc; padding: 4px 8px; text-align: right; }
th { background: #f4f4f4; }
td.l, th.l { text-align: left; }
.kpi { display: flex; flex-wrap: wrap; gap: 12px; margin: 12px 0 20px; }
.kpi div { border: 1px solid #ddd; border-radius: 6px; padding: 8px 14px; min-width: 130px; }
.kpi b { display: block; font-size: 20px; }
.kpi span { font-size: 12px; color: #555; }
.note { font-size: 13px; color: #444; }
.legend { font-size: 12px; display: flex; flex-wrap: wrap; gap: 6px 18px; margin: 0 0 8px 70px; }
.legend svg { vertical-align: middle; }
td code { word-break: break-all; }
table.kv td { text-align: left; }
pre { background: #f7f7f7; padding: 8px; overflow-x: auto; font-size: 12px; }
</style>
</head>
<body>
<h1>erpsync load test {{if .R.OK}}<span class="ok">OK</span>{{else}}<span class="bad">FAILED</span>{{end}}</h1>
<p class="note">{{.R.StartedAt.Format "2006-01-02 15:04:05 MST"}} &middot; {{.R.Config.Records}} records (seed {{.R.Config.Seed}}) &middot; {{.R.Config.Processes}} processes (1 run, {{.Backfills}} backfills) &middot; database <code>{{.R.Config.Database}}</code> &middot; job <code>{{.R.Config.Job}}</code></p>
{{if .R.Failures}}<ul>{{range .R.Failures}}<li class="bad">{{.}}</li>{{end}}</ul>{{end}}
<div class="kpi">
<div><b>{{f0 .R.RecordsPerSecond}}</b><span>feed records/s overall</span></div>
<div><b>{{f0 .R.ProcessedPerSecond}}</b><span>records/s handled, all processes</span></div>
<div><b>{{f1 .R.Seconds}} s</b><span>wall time</span></div>
<div><b>{{num .R.Latency.P50}} / {{num .R.Latency.P95}} / {{num .R.Latency.P99}} ms</b><span>{{.R.LatencyName}} p50 / p95 / p99</span></div>
<div><b>{{.R.Totals.LockContended}}</b><span>lock contended</span></div>
<div><b>{{.R.Totals.UniqueViolations}}</b><span>UNIQUE violations</span></div>
<div><b>{{.R.Totals.StaleRejected}}</b><span>stale rejected</span></div>
<div><b>{{.R.Totals.ERPRetries}}</b><span>ERP retries</span></div>
<div><b>{{if .R.Verify}}{{if .R.Verify.OK}}OK{{else}}MISMATCH{{end}}{{else}}-{{end}}</b><span>verify</span></div>
</div>

<h2>Throughput over time</h2>
{{.Throughput}}
<p class="note">The black line is the growth of <code>memberships</code> (a <code>COUNT(*)</code> every sample): new rows only, updates do not show. The coloured lines are the records erpmock served each process in whole pages.</p>

<h2>Latency histogram</h2>
{{.Histogram}}
<p class="note"><b>{{.R.LatencyName}}</b>, {{.R.Latency.Count}} rows{{if .R.LatencyUnmatched}} ({{.R.LatencyUnmatched}} rows not written during the test left out){{end}}: {{.R.LatencyDefinition}} Database clock offset {{f1 .R.DBClockOffsetMS}} ms (&plusmn;{{f1 .R.DBClockUncertaintyMS}} ms). Min {{num .R.Latency.Min}} ms, mean {{num .R.Latency.Mean}} ms, max {{num .R.Latency.Max}} ms.</p>

<h2>Processes</h2>
<table>
<tr><th>#</th><th class="l">mode</th><th>exit</th><th class="l">status</th><th>records/s</th><th>wall s</th><th>CPU s</th><th>peak RSS MiB</th><th>records served</th><th>ERP request p50 / p95 / p99 ms</th><th class="l">log</th></tr>
{{range .R.Processes}}<tr><td>{{.Index}}</td><td class="l">{{.Mode}}</td><td>{{.ExitCode}}</td>{{with .Report}}<td class="l">{{.Status}}</td>{{else}}<td class="l">no report</td>{{end}}<td>{{f0 .RecordsPerSecond}}</td><td>{{f1 .Seconds}}</td><td>{{f1 .CPUSeconds}}</td><td>{{mib .PeakRSSKiB}}</td><td>{{.Served}}</td><td>{{num .ERPRequestLatency.P50}} / {{num .ERPRequestLatency.P95}} / {{num .ERPRequestLatency.P99}}</td><td class="l">{{base .LogFile}}</td></tr>
{{end}}<tr><th></th><th class="l">all</th><th></th><th></th><th>{{f0 .R.ProcessedPerSecond}}</th><th>{{f1 .R.Seconds}}</th><th></th><th></th><th></th><th>{{num .R.ERPRequestLatency.P50}} / {{num .R.ERPRequestLatency.P95}} / {{num .R.ERPRequestLatency.P99}}</th><th></th></tr>
</table>
<h3>Outcomes (from each process's run report)</h3>
<table>
<tr><th>#</th><th class="l">mode</th><th>fetched</th><th>inserted</th><th>updated</th><th>unchanged</th><th>dup. in feed</th><th>lock contended</th><th>UNIQUE violations</th><th>stale rejected</th><th>invalid</th><th>failed</th><th>ERP requests</th><th>ERP retries</th></tr>
{{range .R.Processes}}<tr><td>{{.Index}}</td><td class="l">{{.Mode}}</td>{{with .Report}}<td>{{.Fetched}}</td><td>{{.Inserted}}</td><td>{{.Updated}}</td><td>{{.Unchanged}}</td><td>{{.DuplicatesInFeed}}</td><td>{{.LockContended}}</td><td>{{.UniqueViolations}}</td><td>{{.StaleRejected}}</td><td>{{.Invalid}}</td><td>{{.Failed}}</td><td>{{.ERPRequests}}</td><td>{{.ERPRetries}}</td>{{else}}<td colspan="12">no report</td>{{end}}</tr>
{{end}}{{with .R.Totals}}<tr><th></th><th class="l">total</th><th>{{.Fetched}}</th><th>{{.Inserted}}</th><th>{{.Updated}}</th><th>{{.Unchanged}}</th><th>{{.DuplicatesInFeed}}</th><th>{{.LockContended}}</th><th>{{.UniqueViolations}}</th><th>{{.StaleRejected}}</th><th>{{.Invalid}}</th><th>{{.Failed}}</th><th>{{.ERPRequests}}</th><th>{{.ERPRetries}}</th></tr>{{end}}
</table>
{{range .R.Processes}}{{if .LogTail}}<h3>Process {{.Index}} ({{.Mode}}): last log lines</h3><pre>{{range .LogTail}}{{.}}
{{end}}</pre>{{end}}{{end}}

<h2>Verification</h2>
{{with .R.Verify}}<table>
<tr><th class="l">feed records</th><th>invalid in feed</th><th>rows</th><th>matching</th><th>missing</th><th>stale</th><th>unknown</th><th>ahead</th></tr>
<tr><td class="l">{{.FeedRecords}}</td><td>{{.FeedInvalid}}</td><td>{{.Rows}}</td><td>{{.Matching}}</td><td>{{.Missing.Count}}</td><td>{{.Stale.Count}}</td><td>{{.Unknown.Count}}</td><td>{{.Ahead.Count}}</td></tr>
</table>{{else}}<p>not run</p>{{end}}

<h2>Mock and configuration</h2>
<table class="kv">
<tr><th class="l">erpmock requests</th><td>{{.R.Mock.Requests}}</td></tr>
<tr><th class="l">answers by status</th><td>{{range $k, $v := .R.Mock.Statuses}}{{$k}}: {{$v}} {{end}}</td></tr>
<tr><th class="l">injected: truncated / hung / duplicates / stale / changed</th><td>{{.R.Mock.Truncated}} / {{.R.Mock.Hung}} / {{.R.Mock.Duplicates}} / {{.R.Mock.Stale}} / {{.R.Mock.Changed}}</td></tr>
<tr><th class="l">records valid / invalid</th><td>{{.R.Mock.Valid}} / {{.R.Mock.Invalid}}</td></tr>
<tr><th class="l">workers / chunk size / page size</th><td>{{or .R.Config.Workers "default"}} / {{or .R.Config.ChunkSize "default"}} / {{or .R.Config.PageSize "default"}}</td></tr>
<tr><th class="l">faults</th><td><code>{{.Faults}}</code></td></tr>
<tr><th class="l">erpsync binary</th><td><code>{{.R.Config.Binary}}</code></td></tr>
</table>
</body>
</html>
`))

func writeHTML(w io.Writer, r *Report) error {
	faults, _ := r.Config.Faults.MarshalJSON()
	return page.Execute(w, map[string]any{
		"R":          r,
		"Backfills":  max(r.Config.Processes-1, 0),
		"Throughput": lineChart("throughput over time", "seconds since start", "records per second", throughputSeries(r)),
		"Histogram":  barChart("latency histogram", r.Latency),
		"Faults":     string(faults),
	})
}
