package pgstore

import "time"

// maxLagSamples bounds what a lagTracker keeps of positions a stalled
// standby has not replayed (a minute or more at the default interval);
// past it the oldest are forgotten, and a standby that then replays only
// those keeps the lag of an older moment (an overestimate) until it
// replays a kept one.
const maxLagSamples = 1024

// lagTracker turns WAL positions into a lag in time. It remembers when the
// primary was at each position it was seen at; a standby that has replayed
// a position holds everything committed before that moment, so its lag is
// at most the time since the newest such moment. The primary's position
// only moves when it is written, so an idle pair stays at 0, and no clock
// of either server is compared with another.
type lagTracker struct {
	samples  []lsnSample // primary positions not yet replayed, oldest first
	started  time.Time   // the first observation
	caughtUp time.Time   // when the primary was at the newest position replayed; zero: none yet
}

type lsnSample struct {
	pos int64
	at  time.Time
}

// observe records the primary at position primary at time at, and a
// standby that has replayed up to replayed (read after the primary's
// position). It returns the standby's lag, and false when no position the
// standby replayed is known yet (the lag returned is then a lower bound).
func (l *lagTracker) observe(at time.Time, primary, replayed int64) (time.Duration, bool) {
	if l.started.IsZero() {
		l.started = at
	}
	if n := len(l.samples); n > 0 && l.samples[n-1].pos >= primary {
		// Not written since: the newer moment says more.
		l.samples[n-1].at = at
	} else {
		l.samples = append(l.samples, lsnSample{pos: primary, at: at})
	}
	i := len(l.samples) - 1
	for i >= 0 && l.samples[i].pos > replayed {
		i--
	}
	if i >= 0 {
		l.caughtUp = l.samples[i].at
		l.samples = l.samples[i+1:]
	}
	if len(l.samples) > maxLagSamples {
		l.samples = l.samples[len(l.samples)-maxLagSamples:]
	}
	if l.caughtUp.IsZero() {
		return at.Sub(l.started), false
	}
	return at.Sub(l.caughtUp), true
}
