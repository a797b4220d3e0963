package bench

import (
	"context"
	"time"
)

// LimitsRun measures only the stores' own limits: bidgate's hot bid script
// against Redis and its cold conditional UPDATE against PostgreSQL, called
// straight from Go (bidgate itself is not loaded; give Options.SkipReady
// to run without it).
func (e *Env) LimitsRun(ctx context.Context) (*Result, error) {
	res := e.newResult("limits", map[string]any{"limitsDuration": e.opt.LimitsDuration.String()})
	res.Targets = nil // bidgate is not loaded
	res.LoadStart = time.Now()
	e.notef("measuring the stores' own limits (%s each)", e.opt.LimitsDuration)
	res.Limits = e.measureLimits(ctx, e.opt.LimitsDuration)
	for _, l := range res.Limits {
		if l.Err != "" {
			res.Checks = append(res.Checks, Check{ID: "limit-ran", Name: "limit ran: " + l.Name, Checked: 1, Failed: 1, Examples: []string{l.Err}})
		}
	}
	res.Finished = time.Now()
	return res, nil
}
