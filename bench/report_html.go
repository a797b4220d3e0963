package bench

import (
	"bytes"
	"encoding/json"
	"fmt"
	"html/template"
	"os"
	"time"
)

// htmlPage is a self-contained report: inline CSS, inline SVG, no scripts.
var htmlPage = template.Must(template.New("report").Funcs(template.FuncMap{
	"ms":    func(f float64) string { return fmt.Sprintf("%.2f", f) },
	"f0":    func(f float64) string { return fmt.Sprintf("%.0f", f) },
	"f1":    func(f float64) string { return fmt.Sprintf("%.1f", f) },
	"f2":    func(f float64) string { return fmt.Sprintf("%.2f", f) },
	"f3":    func(f float64) string { return fmt.Sprintf("%.3f", f) },
	"clock": func(t time.Time) string { return t.Format("15:04:05.000") },
	"when":  func(t time.Time) string { return t.Format("2006-01-02 15:04:05 MST") },
	"dur":   func(a, b time.Time) string { return b.Sub(a).Round(100 * time.Millisecond).String() },
	"n":     func(m map[Outcome]int64, k string) int64 { return m[Outcome(k)] },
	"share": func(n, total int64) string {
		if total == 0 {
			return "-"
		}
		return fmt.Sprintf("%.1f%%", 100*float64(n)/float64(total))
	},
}).Parse(`<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>bidbench {{.R.Scenario}} {{when .R.Started}}</title>
<style>
body{font:14px/1.45 system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;margin:2em auto;max-width:1100px;color:#222;padding:0 1em}
h1{font-size:1.5em;margin-bottom:.2em}h2{font-size:1.15em;margin-top:1.8em;border-bottom:1px solid #ddd}
table{border-collapse:collapse;margin:.5em 0}td,th{padding:3px 10px;border-bottom:1px solid #eee;text-align:right}
th{background:#f5f5f5}td.l,th.l{text-align:left}.pass{color:#1a7f37;font-weight:600}.fail{color:#cf222e;font-weight:600}
.muted{color:#666}svg{max-width:100%;height:auto;display:block;margin:.6em 0}code,pre{font:12px ui-monospace,Menlo,monospace}
pre{background:#f7f7f7;padding:.6em;overflow:auto;max-height:24em}
</style></head><body>
<h1>bidbench {{.R.Scenario}} {{if .R.Passed}}<span class="pass">PASS</span>{{else}}<span class="fail">FAIL</span>{{end}}</h1>
<p class="muted">{{when .R.Started}} · {{dur .R.Started .R.Finished}} {{if .R.Targets}}· targets {{range $i, $t := .R.Targets}}{{if $i}}, {{end}}{{$t}}{{end}} {{end}}· seed {{.R.Seed}}{{if .R.MetricsURLs}} · server CPU from {{range $i, $u := .R.MetricsURLs}}{{if $i}}, {{end}}{{$u}}{{end}}{{end}}</p>
{{with .R}}{{if .Bidders}}<p>{{.Bidders}} distinct bidder ids, {{printf "%.2f" .BidderRate}} bids/s each (bidgate's default limit is 5/s per bidder).</p>{{end}}{{end}}

{{if .R.Latency.All.Count}}
<h2>Latency</h2>
<p>{{.R.Latency.Requests}} requests in {{f1 .R.Latency.Span}} s ({{f0 .R.Latency.Rate}}/s answered, {{f0 .R.Latency.Accepted}} 201/s).
Latency runs from each request's intended send time (open loop); send lag p99 {{ms .R.Latency.SendLag.P99}} ms is the queue and pool wait inside it.
Deliberate short client timeouts (retried with the same key) are left out of "all answered" and the charts.</p>
{{with .R.CPU}}<p>CPU over the load: {{.Sentence}}.</p>{{end}}
{{with .R.Floor}}{{if .DecidedVsFloor}}<p>Floor: the load's {{f0 .Offered}} requests/s for as long to a do-nothing fasthttp server answering {{.BodyBytes}} bytes: {{f1 .UsPerAnswer}} µs of its CPU per answer (p99 {{ms .Latency.P99}} ms); bidgate {{f1 .BidgateUsPerRequest}} µs per request = <b>{{f2 .RequestVsFloor}}×</b> the floor, {{f1 .BidgateUsPerDecided}} µs per decided bid = <b>{{f2 .DecidedVsFloor}}×</b>.</p>{{end}}{{end}}
<table><tr><th class="l">outcome</th><th>count</th><th>share</th><th>p50 ms</th><th>p90 ms</th><th>p99 ms</th><th>p99.9 ms</th><th>max ms</th></tr>
{{range .Rows}}<tr><td class="l">{{.Name}}</td><td>{{.L.Count}}</td><td>{{share .L.Count $.R.Latency.Requests}}</td><td>{{ms .L.P50}}</td><td>{{ms .L.P90}}</td><td>{{ms .L.P99}}</td><td>{{ms .L.P999}}</td><td>{{ms .L.Max}}</td></tr>
{{end}}</table>
{{.LatencyChart}}
{{.HistChart}}
{{.ThroughputChart}}
{{end}}

{{if .R.Hot}}<h2>Hot auctions</h2>
<table><tr><th>id</th><th>offered/s</th><th>sent</th><th>201</th><th>200</th><th>409</th><th>429</th><th>5xx</th><th>201/s</th><th>extended</th><th>original end</th><th>final end</th><th>late refused</th></tr>
{{range .R.Hot}}<tr><td>{{.ID}}</td><td>{{f0 .Offered}}</td><td>{{.Sent}}</td><td>{{n .Outcomes "201"}}</td><td>{{n .Outcomes "200"}}</td><td>{{n .Outcomes "409"}}</td><td>{{n .Outcomes "429"}}</td><td>{{n .Outcomes "5xx"}}</td><td>{{f0 .AcceptedPerSec}}</td><td>{{.Extensions}}</td><td>{{clock .OriginalEnd}}</td><td>{{clock .FinalEnd}}</td><td>{{.LateRefused}}/{{.LateSent}}</td></tr>
{{end}}</table>{{end}}

{{with .R.Cold}}{{if .Auctions}}<h2>Cold auctions</h2>
<p>{{.Auctions}} auctions created via {{.CreatedVia}} in {{f1 .CreateSeconds}} s, {{.EndingInRun}} ending inside the run; {{f0 .Offered}} bids/s offered:
{{.Sent}} sent, {{n .Outcomes "201"}} accepted ({{f1 .AcceptedPerSec}}/s), {{n .Outcomes "409"}} refused, {{n .Outcomes "429"}} rate limited, {{n .Outcomes "5xx"}} 5xx; late bids refused {{.LateRefused}}/{{.LateSent}}.</p>{{end}}{{end}}

{{with .R.Ramp}}<h2>Ramp</h2>
<p>Auction {{.AuctionID}} (hot: {{.Hot}}). {{if .Best}}Highest sustained rate (p99 ≤ {{f0 .P99Ms}} ms, no errors): <b>{{f0 .Best.Offered}} bids/s</b> offered, {{f0 .Best.DecidedPerSec}} decided/s, {{f0 .Best.AcceptedPerSec}} accepted/s, p99 {{ms .Best.Latency.P99}} ms{{with .VsLimit}}: <b>{{f3 .DecidedFraction}}</b> of the decided rate of "{{.Limit}}" measured in the same run ({{f0 .LimitDecided}} decided/s){{end}}.
CPU at that step: {{.Best.CPU.Sentence}}.{{else}}No step held.{{end}} Stopped: {{.Stop}}</p>
{{with .Floor}}{{if .VsFloor}}<p>Floor: step {{.Step}}'s {{f0 .Offered}} bids/s to a do-nothing fasthttp server answering {{.BodyBytes}} bytes: {{f1 .UsPerAnswer}} µs of its CPU per answer (p99 {{ms .Latency.P99}} ms); bidgate {{f1 .BidgateUsPerAnswer}} µs per answer at that step = <b>{{f2 .VsFloor}}×</b> the floor.</p>{{end}}{{end}}
<table><tr><th>step</th><th>offered/s</th><th>answered/s</th><th>decided/s</th><th>201/s</th><th>errors</th><th>429</th><th>p50 ms</th><th>p99 ms</th><th>max ms</th><th>send lag p99</th>{{range $.CPUColumns}}<th>{{.}}</th>{{end}}<th class="l">verdict</th></tr>
{{range .Steps}}<tr><td>{{.N}}</td><td>{{f0 .Offered}}</td><td>{{f0 .SentPerSec}}</td><td>{{f0 .DecidedPerSec}}</td><td>{{f0 .AcceptedPerSec}}</td><td>{{.Errors}}</td><td>{{.RateLimited}}</td><td>{{ms .Latency.P50}}</td><td>{{ms .Latency.P99}}</td><td>{{ms .Latency.Max}}</td><td>{{ms .SendLag.P99}}</td>{{range .CPU.Cells}}<td>{{.}}</td>{{end}}<td class="l">{{if .OK}}ok{{else}}{{.Reason}}{{end}}</td></tr>
{{end}}</table>
<p class="muted">CPU per step: bidgate is every node's process_cpu_seconds_total, summed; bidbench its own getrusage, per request sent; Redis its INFO cpu (the whole server); cores are CPU seconds per second of the step; decided = 201 + 409.</p>{{end}}
{{.RampChart}}

{{with .R.Viewers}}<h2>Viewers</h2>
<p>{{.ConnectSentence}}.</p>
<p>{{.MessageSentence}}.</p>
<p>{{.CostSentence}}.</p>
<table><tr><th class="l">delivery lag</th><th>messages</th><th>p50 ms</th><th>p90 ms</th><th>p99 ms</th><th>p99.9 ms</th><th>max ms</th></tr>
<tr><td class="l">updatedAt → arrival</td><td>{{.Lag.Count}}</td><td>{{ms .Lag.P50}}</td><td>{{ms .Lag.P90}}</td><td>{{ms .Lag.P99}}</td><td>{{ms .Lag.P999}}</td><td>{{ms .Lag.Max}}</td></tr></table>{{end}}
{{with .R.Pollers}}<h2>Pollers</h2>
<p>{{.Sentence}}.</p>{{end}}
{{with .R.Reads}}<h2>Reads</h2>
<p>GET /auctions/{{.ColdAuction}} (cold) and /auctions/{{.HotAuction}} (hot) against the floor, a do-nothing fasthttp server at {{.FloorTarget}} answering {{.FloorBodyBytes}} bytes, on the same open-loop generator.
Server CPU: the floor process's /proc/&lt;pid&gt;/stat, bidgate's nodes' process_cpu_seconds_total summed, over each run.</p>
<table><tr><th class="l">kind</th><th>runs</th><th>answered/s</th><th>p50 ms</th><th>p99 ms</th><th>max ms</th><th>server µs/answer</th><th>× floor</th></tr>
{{range .Medians}}<tr><td class="l">{{.Kind}}</td><td>{{.Runs}}</td><td>{{f0 .AnsweredPerSec}}</td><td>{{ms .P50}}</td><td>{{ms .P99}}</td><td>{{ms .Max}}</td><td>{{f1 .ServerUsPerAnswer}}</td><td>{{ms .VsFloor}}</td></tr>
{{end}}</table>
<table><tr><th>round</th><th class="l">kind</th><th>offered/s</th><th>sent</th><th>answered/s</th><th class="l">status</th><th>p50 ms</th><th>p99 ms</th><th>max ms</th><th>server µs/answer</th><th>bidbench µs/req</th></tr>
{{range .Runs}}<tr><td>{{.Round}}</td><td class="l">{{.Kind}}</td><td>{{f0 .Offered}}</td><td>{{.Sent}}</td><td>{{f0 .AnsweredPerSec}}</td><td class="l">{{range $k, $v := .Status}}{{$k}} {{$v}} {{end}}</td><td>{{ms .Latency.P50}}</td><td>{{ms .Latency.P99}}</td><td>{{ms .Latency.Max}}</td><td>{{if .ServerMissing}}-{{else}}{{f1 .ServerUsPerAnswer}}{{end}}</td><td>{{f1 .GenUsPerRequest}}</td></tr>
{{end}}</table>{{end}}

{{with .R.Browse}}<h2>Browse</h2>
<p>{{.Auctions}} auctions (ids {{.FirstAuction}}..{{.LastAuction}}) and {{.Bids}} bids{{if .Seeded}}, seeded with SQL in {{f1 .SeedSeconds}} s{{end}};
{{f0 .Offered}} actions/s offered, {{.Actions}} actions, {{.Requests}} requests in {{f1 .WallSeconds}} s, {{.NotOK}} not 200.
Latency: a first page from its intended send time, a further page from its send.</p>
<table><tr><th class="l">kind</th><th>actions</th><th>requests</th><th>items</th><th class="l">status</th><th>p50 ms</th><th>p99 ms</th><th>max ms</th></tr>
{{range .Kinds}}<tr><td class="l">{{.Kind}}</td><td>{{.Actions}}</td><td>{{.Requests}}</td><td>{{.Items}}</td><td class="l">{{range $k, $v := .Status}}{{$k}} {{$v}} {{end}}</td><td>{{ms .Latency.P50}}</td><td>{{ms .Latency.P99}}</td><td>{{ms .Latency.Max}}</td></tr>
{{end}}</table>
<p>{{if .PGMissing}}PostgreSQL CPU unknown: {{.PGMissing}}{{else}}PostgreSQL CPU (every postgres process's /proc/&lt;pid&gt;/stat, whoever's work): {{printf "%.2f" .PGCPUSeconds}} s over the load, {{f0 .PGUsPerQuery}} µs per request, all kinds together.{{end}}</p>{{end}}

{{with .R.CloseBurst}}<h2>Close burst</h2>
<p>{{.Auctions}} auctions ending from {{clock .FirstEnd}} to {{clock .LastEnd}} (database clock), {{.Bids}} with a bid.
{{.Closed}} CLOSED; the last one {{printf "%.2f" .AfterFirstEnd}} s after the first end, {{printf "%.2f" .AfterLastEnd}} s after the last end; {{f0 .ClosePerSec}} closes/s.{{if .TimedOut}} <span class="fail">Timed out.</span>{{end}}</p>{{end}}
{{.CloseChart}}

{{if .R.Limits}}<h2>Limits</h2>
<p>bidgate's own serialization statements called straight from Go (no HTTP, cache, rate limit or pipeline), in the same run.</p>
<table><tr><th class="l">limit</th><th>decided/s</th><th>accepted/s</th><th>calls</th><th class="l">error</th></tr>
{{range .R.Limits}}<tr><td class="l">{{.Name}}</td><td>{{f0 .DecidedPerSec}}</td><td>{{f0 .AcceptedPerSec}}</td><td>{{.Calls}}</td><td class="l">{{.Err}}</td></tr>
{{end}}</table>
{{if .R.Ratios}}<p>bidgate as a fraction of each limit: its 201/s over the limit's accepted/s, and its decisions (201 + 409) per second over the limit's decided/s.</p>
<table><tr><th class="l">bidgate</th><th>201/s</th><th>decided/s</th><th class="l">limit</th><th>accepted fraction</th><th>decided fraction</th></tr>
{{range .R.Ratios}}<tr><td class="l">{{.What}}</td><td>{{f0 .Accepted}}</td><td>{{f0 .Decided}}</td><td class="l">{{.Limit}}</td><td>{{f3 .AcceptedFraction}}</td><td>{{f3 .DecidedFraction}}</td></tr>
{{end}}</table>{{end}}{{end}}

<h2>Audit</h2>
{{with .R.Drain}}<p>Pipeline {{if .Drained}}drained{{else}}<span class="fail">not drained</span> ({{.Pending}}){{end}} after {{f1 .Waited}} s.</p>{{end}}
<table><tr><th class="l">result</th><th>invariant</th><th class="l">check</th><th>checked</th><th>failed</th></tr>
{{range .R.Checks}}<tr><td class="l">{{if .Pass}}<span class="pass">PASS</span>{{else}}<span class="fail">FAIL</span>{{end}}</td><td>{{.Invariant}}</td><td class="l">{{.Name}}{{range .Examples}}<br><code>{{.}}</code>{{end}}</td><td>{{.Checked}}</td><td>{{.Failed}}</td></tr>
{{end}}</table>
{{range .R.Notes}}<p class="muted">note: {{.}}</p>{{end}}

<h2>Settings</h2>
<pre>{{.Settings}}</pre>
{{with .R.Files}}<p class="muted">result {{.JSON}}{{if .Records}} · records {{.Records}}{{end}}</p>{{end}}
</body></html>
`))

type htmlRow struct {
	Name string
	L    Latency
}

// WriteHTML writes the report of res to path.
func WriteHTML(path string, res *Result) error {
	data := struct {
		R                                                               *Result
		Rows                                                            []htmlRow
		LatencyChart, HistChart, ThroughputChart, RampChart, CloseChart template.HTML
		Settings                                                        string
		CPUColumns                                                      []string
	}{R: res, CPUColumns: cpuColumns}
	for _, o := range Outcomes {
		if l, ok := res.Latency.ByOutcome[o]; ok {
			data.Rows = append(data.Rows, htmlRow{string(o), l})
		}
	}
	data.Rows = append(data.Rows, htmlRow{"all answered", res.Latency.All})
	var err error
	if data.LatencyChart, err = svgOf(latencyOverTimePlot(res.Latency.Seconds)); err != nil {
		return err
	}
	if data.HistChart, err = svgOf(histogramPlot(res.Latency.Buckets)); err != nil {
		return err
	}
	if data.ThroughputChart, err = svgOf(throughputPlot(res.Latency.Seconds)); err != nil {
		return err
	}
	if data.RampChart, err = svgOf(rampPlot(res.Ramp)); err != nil {
		return err
	}
	if data.CloseChart, err = svgOf(closePlot(res.CloseBurst)); err != nil {
		return err
	}
	settings, _ := json.MarshalIndent(res.Settings, "", "  ")
	data.Settings = string(settings)
	var buf bytes.Buffer
	if err := htmlPage.Execute(&buf, data); err != nil {
		return err
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}
