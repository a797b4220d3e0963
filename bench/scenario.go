package bench

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"bidgate"
)

// Prices of the auctions the harness creates.
const (
	hotStartCents  = 100000 // 1000.00
	coldStartCents = 10000  // 100.00
	incCents       = 100    // 1.00
)

// cents writes an amount the way bidgate does, without going through a
// decimal: the load builds one per bid.
func cents(c int64) string { return bidgate.FormatCents(c) }

func (e *Env) newResult(scenario string, settings any) *Result {
	r := &Result{Scenario: scenario, Started: time.Now(), Seed: e.seed, Settings: settings}
	for _, t := range e.targets {
		r.Targets = append(r.Targets, t.Base)
	}
	if e.cpu != nil {
		r.MetricsURLs = e.cpu.urls
	}
	r.Notes = append(r.Notes, e.cpuNotes...)
	return r
}

// load runs fn with a loader and a progress bar, and returns the records.
// The loader stops by itself at bound (jobs not yet sent are dropped and
// noted), whatever the targets do; the run goes on to its audit.
func (e *Env) load(ctx context.Context, res *Result, bound time.Duration, fn func(ld *Loader)) []Record {
	lctx, cancel := context.WithTimeout(ctx, bound)
	defer cancel()
	rec := &Recorder{}
	ld := e.loader(lctx, rec)
	bar := startProgress(e.opt.Stderr, e.opt.Progress, res.Scenario, ld.Planned, rec.done.Load,
		func() string { return fmt.Sprintf("201 %d  err %d", rec.created.Load(), rec.errors.Load()) })
	fn(ld)
	ld.Close()
	bar.Stop()
	if n := ld.Dropped(); n > 0 && ctx.Err() == nil {
		res.note(fmt.Sprintf("the load hit its time bound (%s): %d scheduled requests were not sent", bound.Round(time.Second), n))
	}
	return rec.Records()
}

// audit waits for the pipeline (and for the viewers of w, nil without,
// to get their closed messages), reads the stores and checks the
// invariants.
func (e *Env) audit(ctx context.Context, res *Result, specs []AuctionSpec, w *watch, ib *inboxes) error {
	e.notef("waiting (up to %s) for the pipeline: hot bids into PostgreSQL, ended auctions CLOSED", e.opt.DrainTimeout)
	d := e.waitDrained(ctx, specs, e.opt.DrainTimeout)
	res.Drain = &d
	if !d.Drained {
		res.note(fmt.Sprintf("the pipeline had not drained after %.0fs (%s): the audit ran anyway", d.Waited, d.Pending))
	}
	var logs []ViewerLog
	if w != nil {
		w.finish(viewerGrace)
		logs = w.connectedLogs()
		res.Viewers = w.result()
	}
	ds, err := e.collect(ctx, specs, res.records, d.At)
	if err != nil {
		return err
	}
	ds.Watched, ds.Viewers = w != nil, logs
	res.Checks = append(Audit(ds), res.Checks...)
	if ib != nil {
		stored := ds.Notices
		ib.finish(ib.expected(stored), inboxGrace)
		var check Check
		res.Inboxes, check = ib.result(stored, res.LoadStart)
		res.Checks = append(res.Checks, check)
	}
	if n := mixNote(ds); n != "" {
		res.note(n)
	}
	return nil
}

// mixNote says which rules the run exercised: its rows by kind and its
// refusals (409) by code; "" without bids.
func mixNote(d Dataset) string {
	if len(d.Bids) == 0 {
		return ""
	}
	kinds := map[string]int{}
	for _, b := range d.Bids {
		kinds[cmp.Or(b.Kind, rowStraight)]++
	}
	codes := map[string]int{}
	for i := range d.Records {
		if d.Records[i].Outcome == Conflict {
			codes[cmp.Or(d.Records[i].Code, "?")]++
		}
	}
	return fmt.Sprintf("bid rows by kind: %s; 409 refusals by code: %s", counts(kinds), counts(codes))
}

// counts writes a tally as "key n, key n" in key order.
func counts(m map[string]int) string {
	if len(m) == 0 {
		return "none"
	}
	parts := make([]string, 0, len(m))
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

// limits measures the stores' ceilings (when enabled) and puts bidgate's
// rates against them.
func (e *Env) limits(ctx context.Context, res *Result, hot, cold Rate) {
	if !e.opt.Limits {
		return
	}
	e.notef("measuring the stores' own limits (%s each)", e.opt.LimitsDuration)
	res.Limits = e.measureLimits(ctx, e.opt.LimitsDuration)
	res.Ratios = ratios(hot, cold, res.Limits)
}

// sleepUntil waits for t or ctx.
func sleepUntil(ctx context.Context, t time.Time) error {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
