//go:build chaos

package chaos

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"bidgate/bench"
)

// row is one scenario's line in the summary table.
type row struct {
	scenario string
	took     time.Duration
	created  int // 201 answers
	// -1 when unknown (the run or its audit did not finish).
	missing      int // 201s with no row in bid (bench.Loss)
	duplicates   int // Idempotency-Keys that yielded more than one bid (bench.Loss)
	wrongWinners int // the audit's check winner: a closed auction whose event (or row) names the wrong winner, price or count
	errors       string
	degraded     int           // one-second windows, from the fault's start on, in which under 99% of bids were decided
	recovery     time.Duration // from the fault's end to the end of the last degraded window; -1: unknown
	recovered    bool          // false when the load's last second was still degraded
	pass         bool
	reasons      []string
	// reported are the audit's failures of a scenario that reports loss
	// rather than failing on it (scenario.lossReported).
	reported []string
	timeline string
}

// decidedShare is the share of a second's bids that must be decided (201,
// 200 or 409) for that second to count as served at the offered rate.
const decidedShare = 0.99

// summarize turns an outcome into its row and says why it failed, if it
// did.
func summarize(o *outcome, took time.Duration) row {
	r := row{scenario: o.sc.name, took: took, missing: -1, duplicates: -1, wrongWinners: -1, recovery: -1, recovered: true}
	var origin time.Time
	if o.res != nil {
		origin = o.res.LoadStart
		recs := o.res.Records()
		for i := range recs {
			if recs[i].Outcome == bench.Created {
				r.created++
			}
		}
		r.errors = errorKinds(recs)
		start, end := o.tl.bounds()
		if !start.IsZero() {
			r.degraded, r.recovery, r.recovered = recovery(recs, origin, start, end)
		}
		if len(o.res.Checks) > 0 {
			r.wrongWinners = failures(o.res, bench.CheckWinner)
		}
		var audit []string
		if o.loss != nil {
			r.missing, r.duplicates = o.loss.Missing, o.loss.DuplicateKeys
			if o.loss.Altered > 0 {
				audit = append(audit, fmt.Sprintf("%d acknowledged bids are in the bid table with another bidder, amount or seq than answered", o.loss.Altered))
			}
		}
		for _, c := range o.res.Failed() {
			why := fmt.Sprintf("check %s FAILED (%d of %d): %s", c.ID, c.Failed, c.Checked, c.Name)
			for _, e := range c.Examples {
				why += "\n      " + e
			}
			audit = append(audit, why)
		}
		if o.sc.lossReported {
			r.reported = audit
		} else {
			r.reasons = append(r.reasons, audit...)
		}
		if o.res.Drain != nil && !o.res.Drain.Drained {
			r.reasons = append(r.reasons, fmt.Sprintf("pipeline not drained after %.0fs: %s", o.res.Drain.Waited, o.res.Drain.Pending))
		}
		if len(o.res.Checks) == 0 && o.benchErr == nil {
			r.reasons = append(r.reasons, "the bench ran no audit")
		}
	} else {
		r.errors = "-"
	}
	if o.benchErr != nil {
		r.reasons = append(r.reasons, "bench: "+o.benchErr.Error())
	}
	if o.lossErr != nil {
		r.reasons = append(r.reasons, o.lossErr.Error())
	}
	if o.faultErr != nil {
		r.reasons = append(r.reasons, "fault: "+o.faultErr.Error())
	}
	for _, d := range o.deaths {
		r.reasons = append(r.reasons, "unexpected exit: "+d.String())
	}
	if len(o.notAlive) > 0 {
		r.reasons = append(r.reasons, "not running at the end: "+strings.Join(o.notAlive, ", "))
	}
	if len(o.readyz) > 0 {
		r.reasons = append(r.reasons, "GET /readyz not 200 while it had to be:\n      "+strings.Join(o.readyz, "\n      "))
	}
	r.reasons = append(r.reasons, o.tl.problemList()...)
	r.pass = len(r.reasons) == 0
	if !origin.IsZero() {
		r.timeline = o.tl.describe(origin)
	}
	return r
}

func failures(res *bench.Result, id string) int {
	for _, c := range res.Checks {
		if c.ID == id {
			return c.Failed
		}
	}
	return -1
}

// errorKinds counts the answers a client sees as errors, by kind: 5xx and
// other unexpected statuses by status and problem code, 429, and transport
// errors by cause. The harness's own deliberately short timeouts are not
// errors.
func errorKinds(recs []bench.Record) string {
	n := map[string]int{}
	for i := range recs {
		r := &recs[i]
		switch r.Outcome {
		case bench.ServerError, bench.OtherStatus:
			n[strings.TrimSpace(fmt.Sprintf("%d %s", r.Status, r.Code))]++
		case bench.RateLimited:
			n["429"]++
		case bench.Transport:
			n["transport "+transportCause(r.Err)]++
		}
	}
	if len(n) == 0 {
		return "none"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(n)) {
		parts = append(parts, fmt.Sprintf("%s: %d", k, n[k]))
	}
	return strings.Join(parts, ", ")
}

func transportCause(err string) string {
	switch {
	case strings.Contains(err, "connection refused"):
		return "refused"
	case strings.Contains(err, "timeout"), strings.Contains(err, "timed out"):
		return "timeout"
	case strings.Contains(err, "reset"), strings.Contains(err, "broken pipe"), strings.Contains(err, "closed"), strings.Contains(err, "EOF"):
		return "reset"
	}
	return "other"
}

// recovery cuts the scheduled bids (and their retries) into one-second
// windows by send time from origin (the load's start). A window is
// degraded when under 99% of its bids were decided (201, 200 or 409).
// It returns how many windows from the fault's start on were degraded; the
// recovery time: from the fault's end (the process back and serving) to
// the end of the last degraded window, 0 if none came after it, -1 when
// the fault never ended; and whether the load's last window was served
// (false: no recovery before the load ended).
func recovery(recs []bench.Record, origin, start, end time.Time) (int, time.Duration, bool) {
	type window struct{ sent, decided int }
	w := map[int]*window{}
	for i := range recs {
		r := &recs[i]
		if r.Kind == bench.KindLate || r.Outcome == bench.PlannedTimeout || r.Sent.Before(origin) {
			continue
		}
		k := int(r.Sent.Sub(origin) / time.Second)
		if w[k] == nil {
			w[k] = &window{}
		}
		w[k].sent++
		switch r.Outcome {
		case bench.Created, bench.Replayed, bench.Conflict:
			w[k].decided++
		}
	}
	degraded, final := 0, -1
	var last time.Time
	bad := func(x *window) bool { return float64(x.decided) < decidedShare*float64(x.sent) }
	for k, x := range w {
		if x.sent >= 10 { // the load's last, partial second may hold only a few bids
			final = max(final, k)
		}
		wEnd := origin.Add(time.Duration(k+1) * time.Second)
		if !wEnd.After(start) || !bad(x) {
			continue
		}
		degraded++
		if wEnd.After(last) {
			last = wEnd
		}
	}
	recovered := final < 0 || !bad(w[final])
	if end.IsZero() {
		return degraded, -1, recovered
	}
	return degraded, max(0, last.Sub(end)), recovered
}

func count(n int) string {
	if n < 0 {
		return "?"
	}
	return fmt.Sprint(n)
}

// writeTable writes the summary: one line per scenario, then what every
// failure was and each fault's timeline.
func writeTable(w io.Writer, rows []row) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\ttook\t201s\tmissing\tdups\twrong winners\tdegraded s\trecovery\tresult\tclient-visible errors")
	for _, r := range rows {
		rec := "?"
		switch {
		case !r.recovered:
			rec = "never"
		case r.recovery >= 0:
			rec = r.recovery.Round(100 * time.Millisecond).String()
		}
		result := "PASS"
		switch {
		case !r.pass:
			result = "FAIL"
		case len(r.reported) > 0:
			result = "REPORTED"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", r.scenario, r.took.Round(time.Second), r.created,
			count(r.missing), count(r.duplicates), count(r.wrongWinners), r.degraded, rec, result, r.errors)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write the table: %w", err)
	}
	_, err := fmt.Fprint(w, `
missing: 201s with no row in the bid table; dups: Idempotency-Keys that yielded more than one bid
(two rows, two 201s, or answers naming different seqs); wrong winners: failures of the audit's
check winner. degraded s: one-second windows (by send time) from the fault's start on in which
under 99% of bids were decided (201/200/409). recovery: from the fault's end (the process back and
serving) to the end of the last degraded window; "never": the load's last second was still
degraded. Errors are every answer of the run that was 5xx, another unexpected status, 429 or a
transport error (the bench's deliberate 1 ms timeouts excluded); the load goes round-robin to all
three nodes, a node that is down included. PASS: every audit check passed, no process exited
unasked, all are running at the end, and (broker scenarios) every /readyz stayed 200.
redis-failover runs on a Redis Cluster with --redis-wait-replicas 1 and must lose nothing;
redis-failover-nowait is the same without WAIT: it reports what the failover lost (REPORTED:
audit checks failed because of it) instead of failing on it.
`)
	if err != nil {
		return fmt.Errorf("write the table: %w", err)
	}
	for _, r := range rows {
		if _, err := fmt.Fprintf(w, "\n%s: %s\n", r.scenario, r.timeline); err != nil {
			return fmt.Errorf("write the table: %w", err)
		}
		for _, why := range r.reasons {
			if _, err := fmt.Fprintf(w, "  FAIL: %s\n", why); err != nil {
				return fmt.Errorf("write the table: %w", err)
			}
		}
		for _, what := range r.reported {
			if _, err := fmt.Fprintf(w, "  REPORTED: %s\n", what); err != nil {
				return fmt.Errorf("write the table: %w", err)
			}
		}
	}
	return nil
}
