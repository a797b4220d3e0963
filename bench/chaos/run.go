//go:build chaos

package chaos

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"bidgate/bench"
)

// The load of every scenario: 3 hot auctions at 150 bids/s each, 100 bids/s
// spread over 2,000 cold auctions created through the API, 5% of the
// requests sent again with the same Idempotency-Key.
func flashSale(load time.Duration) bench.FlashSaleConfig {
	c := bench.DefaultFlashSale()
	c.Cold, c.Create, c.ColdRate = 2000, "api", 100
	c.Hot, c.HotRate = 3, 150
	c.RetryShare = 0.05
	c.Duration, c.Warmup = load, 0 // a fault is timed from the load's start
	return c
}

// drainTimeout bounds the bench's wait for the pipeline (hot bids into
// PostgreSQL, ended auctions closed) before it audits anyway.
const drainTimeout = 60 * time.Second

// loadAnnouncement is the note the bench writes just before it starts the
// load (bench/scenario_flashsale.go: "load: %d hot auctions at ..."); the
// fault is timed from it. The load starts within 2 s of it.
const loadAnnouncement = "bidbench: load:"

// outcome is everything one scenario produced.
type outcome struct {
	sc       scenario
	tl       *timeline
	res      *bench.Result
	benchErr error
	loss     *bench.Loss // nil when it could not be counted
	lossErr  error
	faultErr error
	readyz   []string // GET /readyz answers other than 200 where they had to be 200
	deaths   []death
	notAlive []string
}

// runLoad runs the flash sale against s, injects the scenario's fault while
// it runs, and waits for the bench's result, audit included.
func runLoad(ctx context.Context, s *stack, sc scenario, logf func(string, ...any)) *outcome {
	o := &outcome{sc: sc, tl: &timeline{}}
	announced := make(chan struct{})
	notes := &noteWriter{logf: logf, trigger: []byte(loadAnnouncement), fired: announced}
	opt := bench.DefaultOptions()
	opt.Targets, opt.PostgresURL, opt.RedisAddrs = s.targets(), s.postgresURL(), s.redisAddr()
	opt.Key = s.key // the nodes' --dev-key, with its issuer and audience (the defaults)
	opt.Limits, opt.DrainTimeout, opt.Stderr = false, drainTimeout, notes
	env, err := bench.NewEnv(ctx, opt)
	if err != nil {
		o.benchErr = fmt.Errorf("connect the bench: %w", err)
		return o
	}
	defer env.Close()

	type benchDone struct {
		res *bench.Result
		err error
	}
	results := make(chan benchDone, 1)
	go func() {
		res, err := env.FlashSale(ctx, flashSale(sc.load))
		results <- benchDone{res, err}
	}()
	select {
	case <-announced:
	case d := <-results:
		o.res, o.benchErr = d.res, fmt.Errorf("the bench ended before it started the load: %v", d.err)
		return o
	}

	mctx, stopMonitor := context.WithCancel(ctx)
	var monitor sync.WaitGroup
	faultDone := make(chan error, 1)
	go func() {
		if err := hold(ctx, sc.at); err != nil {
			faultDone <- err
			return
		}
		if sc.readyzHolds {
			monitor.Add(1)
			go func() {
				defer monitor.Done()
				o.readyz = watchReadyz(mctx, s)
			}()
		}
		faultDone <- sc.inject(ctx, s, o.tl)
	}()
	o.faultErr = <-faultDone
	d := <-results
	stopMonitor()
	monitor.Wait()
	o.res, o.benchErr = d.res, d.err
	o.deaths, o.notAlive = s.unexpectedDeaths(), s.notAlive()
	if o.res != nil {
		if l, err := env.CountLoss(ctx, o.res); err != nil {
			o.lossErr = fmt.Errorf("count lost and duplicated bids: %w", err)
		} else {
			o.loss = &l
		}
	}
	return o
}

// watchReadyz asks every node's GET /readyz once a second until ctx ends
// and returns every answer that was not 200 (at most 20, then a count).
func watchReadyz(ctx context.Context, s *stack) []string {
	var bad []string
	more := 0
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		for _, n := range s.nodes {
			status, err := readyz(ctx, n)
			if ctx.Err() != nil {
				break
			}
			if err == nil && status == http.StatusOK {
				continue
			}
			what := fmt.Sprintf("%s %s: ", n.id, time.Now().Format("15:04:05"))
			if err != nil {
				what += err.Error()
			} else {
				what += fmt.Sprintf("GET /readyz answered %d", status)
			}
			if len(bad) < 20 {
				bad = append(bad, what)
			} else {
				more++
			}
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			if more > 0 {
				bad = append(bad, fmt.Sprintf("... and %d more", more))
			}
			return bad
		}
	}
}

// noteWriter passes the bench's notes on, a line at a time, and closes
// fired at the first line that contains trigger.
type noteWriter struct {
	mu      sync.Mutex
	logf    func(string, ...any)
	trigger []byte
	fired   chan struct{}
	once    sync.Once
	partial []byte
}

func (w *noteWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.partial = append(w.partial, b...)
	for {
		i := bytes.IndexByte(w.partial, '\n')
		if i < 0 {
			return len(b), nil
		}
		line := w.partial[:i]
		w.logf("%s", line)
		if bytes.Contains(line, w.trigger) {
			w.once.Do(func() { close(w.fired) })
		}
		w.partial = w.partial[i+1:]
	}
}
