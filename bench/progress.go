package bench

import (
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// progress draws a live bar on stderr: answered of planned, the current
// rate, 201s, errors and the elapsed time. All drawing happens in its own
// goroutine.
type progress struct {
	stop, done chan struct{}
}

// startProgress starts the bar (a no-op when disabled). planned and done
// are read each tick (retries add to planned as the run goes); detail adds
// counters after the rate.
func startProgress(w io.Writer, enabled bool, name string, planned, done func() int64, detail func() string) *progress {
	p := &progress{stop: make(chan struct{}), done: make(chan struct{})}
	if !enabled {
		close(p.done)
		return p
	}
	bar := progressbar.NewOptions64(max(1, planned()),
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription(name),
		progressbar.OptionSetWidth(30),
		progressbar.OptionShowCount(),
		progressbar.OptionSetElapsedTime(true),
		progressbar.OptionSetPredictTime(false),
		progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish(),
	)
	go func() {
		defer close(p.done)
		tick := time.NewTicker(250 * time.Millisecond)
		defer tick.Stop()
		last, lastAt := done(), time.Now()
		for {
			select {
			case <-p.stop:
				_ = bar.Finish()
				return
			case now := <-tick.C:
				n := done()
				rate := float64(n-last) / now.Sub(lastAt).Seconds()
				last, lastAt = n, now
				if m := planned(); m > bar.GetMax64() {
					bar.ChangeMax64(m)
				}
				d := ""
				if detail != nil {
					d = "  " + detail()
				}
				bar.Describe(fmt.Sprintf("%s %6.0f/s%s", name, rate, d))
				_ = bar.Set64(min(n, bar.GetMax64()))
			}
		}
	}()
	return p
}

// Stop clears the bar.
func (p *progress) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	close(p.stop)
	<-p.done
}
