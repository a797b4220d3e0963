package bench

import (
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// WriteText writes the terminal summary of res.
func WriteText(w io.Writer, res *Result) {
	fmt.Fprintf(w, "\nbidbench %s  %s  (%s)\n", res.Scenario, res.Started.Format("2006-01-02 15:04:05"),
		res.Finished.Sub(res.Started).Round(100*time.Millisecond))
	if len(res.Targets) > 0 {
		fmt.Fprintf(w, "targets: %s\n", strings.Join(res.Targets, ", "))
	}
	if len(res.MetricsURLs) > 0 {
		fmt.Fprintf(w, "server CPU from: %s\n", strings.Join(res.MetricsURLs, ", "))
	}
	if res.Bidders > 0 {
		fmt.Fprintf(w, "bidders: %d distinct ids (%.2f bids/s each; bidgate's default limit is 5/s per bidder)\n", res.Bidders, res.BidderRate)
	}
	if res.Latency.All.Count > 0 {
		fmt.Fprintf(w, "requests: %d in %.1fs (%.0f/s answered, %.0f 201/s); latency from the intended send time; send lag p99 %.1f ms (queue and pool wait)\n",
			res.Latency.Requests, res.Latency.Span, res.Latency.Rate, res.Latency.Accepted, res.Latency.SendLag.P99)
		if res.Warmup != nil {
			fmt.Fprintf(w, "warm-up before it (left out of everything else here, audited): %d requests in %.1fs, all answered p50 %.1f ms, p99 %.1f ms; send lag p99 %.1f ms\n",
				res.Warmup.Requests, res.Warmup.Span, res.Warmup.All.P50, res.Warmup.All.P99, res.Warmup.SendLag.P99)
		}
		if res.CPU != nil {
			fmt.Fprintf(w, "CPU over the load: %s\n", res.CPU.Sentence())
		}
		if f := res.Floor; f != nil && f.DecidedVsFloor > 0 {
			fmt.Fprintf(w, "floor: the load's %.0f requests/s for as long to a do-nothing fasthttp server answering %d bytes: %.1f µs of its CPU per answer (p99 %.1f ms); bidgate %.1f µs per request = %.2f× the floor, %.1f µs per decided bid = %.2f×\n",
				f.Offered, f.BodyBytes, f.UsPerAnswer, f.Latency.P99, f.BidgateUsPerRequest, f.RequestVsFloor, f.BidgateUsPerDecided, f.DecidedVsFloor)
		}
		if n := res.Latency.Count(PlannedTimeout); n > 0 {
			fmt.Fprintf(w, "%d deliberate short client timeouts (each retried with the same key) are left out of \"all answered\"\n", n)
		}
		fmt.Fprintln(w)
		writeLatencyTable(w, res.Latency)
	}
	if len(res.Hot) > 0 {
		fmt.Fprintln(w)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "hot auction\toffered/s\tsent\t201\t200\t409\t429\t5xx\t201/s\textended\toriginal end\tfinal end\tlate refused\t")
		for _, a := range res.Hot {
			fmt.Fprintf(tw, "%d\t%.0f\t%d\t%d\t%d\t%d\t%d\t%d\t%.0f\t%d\t%s\t%s\t%d/%d\t\n", a.ID, a.Offered, a.Sent,
				a.Outcomes[Created], a.Outcomes[Replayed], a.Outcomes[Conflict], a.Outcomes[RateLimited], a.Outcomes[ServerError],
				a.AcceptedPerSec, a.Extensions, a.OriginalEnd.Format("15:04:05.000"), a.FinalEnd.Format("15:04:05.000"), a.LateRefused, a.LateSent)
		}
		tw.Flush()
	}
	if c := res.Cold; c != nil && c.Auctions > 0 {
		fmt.Fprintf(w, "\ncold: %d auctions (created via %s in %.1fs, %d ending inside the run), %.0f bids/s offered: sent %d, 201 %d, 409 %d, 429 %d, 5xx %d, %.1f 201/s; late refused %d/%d\n",
			c.Auctions, c.CreatedVia, c.CreateSeconds, c.EndingInRun, c.Offered, c.Sent, c.Outcomes[Created], c.Outcomes[Conflict],
			c.Outcomes[RateLimited], c.Outcomes[ServerError], c.AcceptedPerSec, c.LateRefused, c.LateSent)
	}
	writeWatchers(w, res)
	writeReads(w, res.Reads)
	writeBrowse(w, res.Browse)
	if r := res.Ramp; r != nil {
		fmt.Fprintf(w, "\nramp on auction %d (hot: %v)\n", r.AuctionID, r.Hot)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "step\toffered/s\tanswered/s\tdecided/s\t201/s\terrors\t429\tp50 ms\tp99 ms\tmax ms\tsend lag p99\t"+
			strings.Join(cpuColumns, "\t")+"\t\t")
		for _, s := range r.Steps {
			verdict := "ok"
			if !s.OK {
				verdict = s.Reason
			}
			fmt.Fprintf(tw, "%d\t%.0f\t%.0f\t%.0f\t%.0f\t%d\t%d\t%.1f\t%.1f\t%.1f\t%.1f\t%s\t%s\t\n", s.N, s.Offered, s.SentPerSec, s.DecidedPerSec, s.AcceptedPerSec,
				s.Errors, s.RateLimited, s.Latency.P50, s.Latency.P99, s.Latency.Max, s.SendLag.P99, strings.Join(s.CPU.Cells(), "\t"), verdict)
		}
		tw.Flush()
		fmt.Fprintln(w, "CPU: bidgate = the nodes' process_cpu_seconds_total summed, bidbench = its own getrusage, Redis = INFO cpu (whole server); cores = CPU s per s of the step")
		if b := r.Best; b != nil {
			fmt.Fprintf(w, "highest sustained rate (p99 ≤ %.0f ms, no errors): %.0f bids/s offered, %.0f decided/s, %.0f accepted/s (p99 %.1f ms)\n",
				r.P99Ms, b.Offered, b.DecidedPerSec, b.AcceptedPerSec, b.Latency.P99)
			if v := r.VsLimit; v != nil {
				fmt.Fprintf(w, "  = %.3f of the decided rate of %q measured in the same run (%.0f decided/s)\n",
					v.DecidedFraction, v.Limit, v.LimitDecided)
			}
			fmt.Fprintf(w, "  CPU at that step: %s\n", b.CPU.Sentence())
		}
		if f := r.Floor; f != nil && f.VsFloor > 0 {
			fmt.Fprintf(w, "floor: step %d's %.0f bids/s to a do-nothing fasthttp server answering %d bytes: %.1f µs of its CPU per answer (p99 %.1f ms); bidgate %.1f µs per answer at that step = %.2f× the floor\n",
				f.Step, f.Offered, f.BodyBytes, f.UsPerAnswer, f.Latency.P99, f.BidgateUsPerAnswer, f.VsFloor)
		}
		fmt.Fprintf(w, "stopped: %s\n", r.Stop)
	}
	if b := res.CloseBurst; b != nil {
		fmt.Fprintf(w, "\nclose-burst: %d auctions ending %s–%s (database clock), %d with a bid\n", b.Auctions,
			b.FirstEnd.Format("15:04:05.000"), b.LastEnd.Format("15:04:05.000"), b.Bids)
		fmt.Fprintf(w, "  CLOSED: %d; the last one %.2fs after the first end, %.2fs after the last end; %.0f closes/s\n",
			b.Closed, b.AfterFirstEnd, b.AfterLastEnd, b.ClosePerSec)
		if b.NodeCPUPerCloseUs > 0 {
			fmt.Fprintf(w, "  bidgate CPU %.1f µs per auction closed (every node, from the first bid until the last close, the bids' included)\n", b.NodeCPUPerCloseUs)
		}
	}
	if len(res.Limits) > 0 {
		fmt.Fprintln(w, "\nlimits (bidgate's own statements called straight from Go)")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "limit\tdecided/s\taccepted/s\tcalls\terror")
		for _, l := range res.Limits {
			fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%d\t%s\n", l.Name, l.DecidedPerSec, l.AcceptedPerSec, l.Calls, l.Err)
		}
		tw.Flush()
	}
	if len(res.Ratios) > 0 {
		fmt.Fprintln(w, "\nbidgate as a fraction of each limit (201/s ÷ the limit's accepted/s; decided = 201 + 409 per second)")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "bidgate\t201/s\tdecided/s\tlimit\taccepted fraction\tdecided fraction")
		for _, r := range res.Ratios {
			fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%s\t%.3f\t%.3f\n", r.What, r.Accepted, r.Decided, r.Limit, r.AcceptedFraction, r.DecidedFraction)
		}
		tw.Flush()
	}
	if d := res.Drain; d != nil {
		state := "drained"
		if !d.Drained {
			state = "NOT drained: " + d.Pending
		}
		fmt.Fprintf(w, "\npipeline: %s after %.1fs\n", state, d.Waited)
	}
	if len(res.Checks) > 0 {
		fmt.Fprintln(w, "\naudit")
		for _, c := range res.Checks {
			verdict := "PASS"
			if !c.Pass {
				verdict = "FAIL"
			}
			fmt.Fprintf(w, "  %s  [%d] %s: %d checked, %d failed\n", verdict, c.Invariant, c.Name, c.Checked, c.Failed)
			for _, ex := range c.Examples {
				fmt.Fprintf(w, "          %s\n", ex)
			}
		}
	}
	for _, n := range res.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	if res.Files.JSON != "" {
		fmt.Fprintf(w, "\nresult: %s\n", res.Files.JSON)
	}
	if res.Files.Records != "" {
		fmt.Fprintf(w, "records: %s\n", res.Files.Records)
	}
	if res.Files.HTML != "" {
		fmt.Fprintf(w, "report: %s\n", res.Files.HTML)
	}
}

func writeLatencyTable(w io.Writer, s Summary) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "outcome\tcount\tshare\tp50 ms\tp90 ms\tp99 ms\tp99.9 ms\tmax ms\t")
	row := func(name string, l Latency) {
		share := 0.0
		if s.Requests > 0 {
			share = 100 * float64(l.Count) / float64(s.Requests)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.1f%%\t%.2f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", name, l.Count, share, l.P50, l.P90, l.P99, l.P999, l.Max)
	}
	for _, o := range Outcomes {
		if l, ok := s.ByOutcome[o]; ok {
			row(string(o), l)
		}
	}
	row("all answered", s.All)
	tw.Flush()
}

// writeWatchers writes the viewers' and the pollers' lines.
func writeWatchers(w io.Writer, res *Result) {
	if v := res.Viewers; v != nil {
		fmt.Fprintf(w, "\nviewers: %s\n", v.ConnectSentence())
		fmt.Fprintf(w, "  %s\n", v.MessageSentence())
		fmt.Fprintf(w, "  %s\n", v.CostSentence())
	}
	if p := res.Pollers; p != nil {
		fmt.Fprintf(w, "\npollers: %s\n", p.Sentence())
	}
	if ib := res.Inboxes; ib != nil {
		fmt.Fprintf(w, "\nnotice listeners: %s\n", ib.Sentence())
		for _, l := range ib.lagLines() {
			fmt.Fprintf(w, "  %s\n", l)
		}
	}
}

// writeReads writes the reads scenario's runs and medians.
func writeReads(w io.Writer, r *Reads) {
	if r == nil {
		return
	}
	fmt.Fprintf(w, "\nreads: GET /auctions/%d (cold) and /auctions/%d (hot) against the floor, a do-nothing fasthttp server at %s answering %d bytes\n",
		r.ColdAuction, r.HotAuction, r.FloorTarget, r.FloorBodyBytes)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "round\tkind\toffered/s\tsent\tanswered/s\tstatus\tp50 ms\tp99 ms\tmax ms\tsend lag p99\tserver µs/answer\tbidbench µs/req\t")
	for _, run := range r.Runs {
		cpu := "-"
		if run.ServerMissing == "" {
			cpu = fmt.Sprintf("%.1f", run.ServerUsPerAnswer)
		}
		fmt.Fprintf(tw, "%d\t%s\t%.0f\t%d\t%.0f\t%s\t%.2f\t%.2f\t%.2f\t%.2f\t%s\t%.1f\t\n", run.Round, run.Kind, run.Offered, run.Sent,
			run.AnsweredPerSec, statusCounts(run.Status), run.Latency.P50, run.Latency.P99, run.Latency.Max, run.SendLag.P99, cpu, run.GenUsPerRequest)
	}
	tw.Flush()
	fmt.Fprintln(w, "\nmedians")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "kind\truns\tanswered/s\tp50 ms\tp99 ms\tmax ms\tserver µs/answer\t× floor\t")
	for _, k := range r.Medians {
		ratio := "-"
		if k.VsFloor > 0 {
			ratio = fmt.Sprintf("%.2f", k.VsFloor)
		}
		fmt.Fprintf(tw, "%s\t%d\t%.0f\t%.2f\t%.2f\t%.2f\t%.1f\t%s\t\n", k.Kind, k.Runs, k.AnsweredPerSec, k.P50, k.P99, k.Max, k.ServerUsPerAnswer, ratio)
	}
	tw.Flush()
	fmt.Fprintln(w, "server CPU: the floor process's /proc/<pid>/stat, bidgate's nodes' process_cpu_seconds_total summed, over each run; latency from the intended send time")
}

// writeBrowse writes the browse scenario's volume and each query kind.
func writeBrowse(w io.Writer, b *Browse) {
	if b == nil {
		return
	}
	how := "found in the database"
	if b.Seeded {
		how = fmt.Sprintf("seeded with SQL in %.1fs", b.SeedSeconds)
	}
	fmt.Fprintf(w, "\nbrowse: %d auctions (ids %d..%d) and %d bids, %s; %.0f actions/s offered, %d actions, %d requests in %.1fs, %d not 200\n",
		b.Auctions, b.FirstAuction, b.LastAuction, b.Bids, how, b.Offered, b.Actions, b.Requests, b.WallSeconds, b.NotOK)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "kind\tactions\trequests\titems/request\tstatus\tp50 ms\tp99 ms\tmax ms\t")
	for _, k := range b.Kinds {
		items := 0.0
		if k.Requests > 0 {
			items = float64(k.Items) / float64(k.Requests)
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%.1f\t%s\t%.2f\t%.2f\t%.2f\t\n", k.Kind, k.Actions, k.Requests, items, statusCounts(k.Status),
			k.Latency.P50, k.Latency.P99, k.Latency.Max)
	}
	tw.Flush()
	if b.PGMissing != "" {
		fmt.Fprintf(w, "PostgreSQL CPU: unknown (%s)\n", b.PGMissing)
		return
	}
	fmt.Fprintf(w, "PostgreSQL CPU: %.2f s over the load (%.2f cores), %.0f µs per request (all kinds together; %d postgres processes, whoever's work)\n",
		b.PGCPUSeconds, b.PGCPUSeconds/max(b.WallSeconds, 1e-9), b.PGUsPerQuery, b.PGProcesses)
	fmt.Fprintln(w, "latency: a first page from its intended send time, a further page from its send")
	if len(b.Solo) == 0 {
		return
	}
	fmt.Fprintln(w, "\neach kind alone, at the same rate (PostgreSQL's CPU of one kind)")
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "kind\trequests\tstatus\tp50 ms\tp99 ms\tmax ms\tPostgreSQL µs/request\t")
	for _, k := range b.Solo {
		cpu := "-"
		if k.PGMissing == "" {
			cpu = fmt.Sprintf("%.0f", k.PGUsPerQuery)
		}
		fmt.Fprintf(tw, "%s\t%d\t%s\t%.2f\t%.2f\t%.2f\t%s\t\n", k.Kind, k.Requests, statusCounts(k.Status), k.Latency.P50, k.Latency.P99, k.Latency.Max, cpu)
	}
	tw.Flush()
}

// statusCounts writes a run's answers by status as "200 9999, transport 1".
func statusCounts(m map[string]int64) string {
	n := make(map[string]int, len(m))
	for k, v := range m {
		n[k] = int(v)
	}
	return strings.ReplaceAll(counts(n), ", ", " ")
}
