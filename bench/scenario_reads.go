package bench

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"
)

// ReadsConfig is the reads scenario: GET /auctions/{id} of a cold and of a
// hot auction, each against the HTTP floor (a do-nothing fasthttp server
// answering a body of the same size), on the same open-loop generator.
type ReadsConfig struct {
	Rate        float64       `json:"rate"` // GET/s offered in each run
	Duration    time.Duration `json:"duration"`
	Repeat      int           `json:"repeat"`      // rounds of floor, cold, hot
	IfNoneMatch bool          `json:"ifNoneMatch"` // send the last ETag (measures 304s)
}

// DefaultReads is issue 24's measurement: 10,000 GET/s for 10 s, three
// rounds.
func DefaultReads() ReadsConfig {
	return ReadsConfig{Rate: 10_000, Duration: 10 * time.Second, Repeat: 3}
}

func (c *ReadsConfig) normalize() error {
	switch {
	case c.Rate <= 0:
		return fmt.Errorf("--rate must be positive")
	case c.Duration < 500*time.Millisecond:
		return fmt.Errorf("--duration must be at least 500ms")
	case c.Repeat < 1 || c.Repeat > 100:
		return fmt.Errorf("--repeat must be from 1 to 100")
	case c.Rate*c.Duration.Seconds() < 1:
		return fmt.Errorf("--rate × --duration sends no request")
	}
	return nil
}

// The kinds of a reads run, in the order each round runs them.
const (
	ReadFloor = "floor"
	ReadCold  = "cold"
	ReadHot   = "hot"
)

var readKinds = []string{ReadFloor, ReadCold, ReadHot}

// Reads is what the reads scenario measured.
type Reads struct {
	ColdAuction int64 `json:"coldAuctionId"`
	HotAuction  int64 `json:"hotAuctionId"`
	// FloorBodyBytes is the floor's answer size: the larger auction JSON.
	FloorBodyBytes int        `json:"floorBodyBytes"`
	FloorTarget    string     `json:"floorTarget"`
	Runs           []ReadRun  `json:"runs"`    // in the order they ran
	Medians        []ReadKind `json:"medians"` // floor, cold, hot
}

// ReadRun is one kind's run in one round.
type ReadRun struct {
	Kind           string           `json:"kind"`
	Round          int              `json:"round"`
	Offered        float64          `json:"offeredPerSecond"`
	Sent           int              `json:"sent"`
	Answered       int64            `json:"answered"` // any status
	AnsweredPerSec float64          `json:"answeredPerSecond"`
	Status         map[string]int64 `json:"status"` // "200", "304", ..., "transport"
	Latency        Latency          `json:"latency"`
	SendLag        Latency          `json:"sendLag"`
	// ServerCPU is the answering server's CPU seconds over the run: the
	// floor process's (/proc/<pid>/stat) or the nodes' summed
	// process_cpu_seconds_total; ServerMissing says why it is not known.
	ServerCPU         float64 `json:"serverCpuSeconds"`
	ServerUsPerAnswer float64 `json:"serverUsPerAnswer"`
	ServerMissing     string  `json:"serverMissing,omitempty"`
	GenUsPerRequest   float64 `json:"bidbenchUsPerRequest"`
	WallSeconds       float64 `json:"wallSeconds"`
}

// ReadKind is one kind's medians over the rounds.
type ReadKind struct {
	Kind              string  `json:"kind"`
	Runs              int     `json:"runs"`
	AnsweredPerSec    float64 `json:"answeredPerSecond"`
	P50               float64 `json:"p50Ms"`
	P99               float64 `json:"p99Ms"`
	Max               float64 `json:"maxMs"`
	ServerUsPerAnswer float64 `json:"serverUsPerAnswer"`
	// VsFloor is ServerUsPerAnswer over the floor's (0 when either is
	// unknown).
	VsFloor float64 `json:"vsFloor"`
}

// ReadsRun creates a cold and a hot auction (ending in a day), starts the
// floor server, and runs floor, cold and hot in turn, Repeat rounds.
func (e *Env) ReadsRun(ctx context.Context, c ReadsConfig) (*Result, error) {
	if err := c.normalize(); err != nil {
		return nil, err
	}
	res := e.newResult("reads", settingsOf(c))
	reads := &Reads{}
	res.Reads = reads
	end := formatEnd(time.Now().Add(24 * time.Hour))
	var sizes []int
	for _, hot := range []bool{false, true} {
		spec, err := e.api.createAuction(newAuction{SellerID: sellerID(0), Title: "bidbench reads", StartPrice: cents(coldStartCents),
			MinIncrement: cents(incCents), EndTime: end, Hot: hot, ExtendBySeconds: 1})
		if err != nil {
			return nil, err
		}
		body, err := e.api.get(0, "/auctions/"+strconv.FormatInt(spec.ID, 10))
		if err != nil {
			return nil, err
		}
		sizes = append(sizes, len(body))
		if hot {
			reads.HotAuction = spec.ID
		} else {
			reads.ColdAuction = spec.ID
		}
	}
	reads.FloorBodyBytes = slices.Max(sizes)
	floor, err := startFloor(ctx, reads.FloorBodyBytes)
	if err != nil {
		return nil, err
	}
	reads.FloorTarget = floor.target.Base
	e.notef("reads: cold auction %d, hot auction %d, floor %s (%d-byte body); %.0f GET/s for %s, %d round(s)",
		reads.ColdAuction, reads.HotAuction, floor.target.Base, reads.FloorBodyBytes, c.Rate, c.Duration, c.Repeat)
	res.LoadStart = time.Now()
	for round := 1; round <= c.Repeat && ctx.Err() == nil; round++ {
		for _, kind := range readKinds {
			run := e.readRun(ctx, c, kind, round, reads, floor)
			reads.Runs = append(reads.Runs, run)
			e.notef("reads: round %d %s: %.0f answered/s, p99 %.1f ms, %.1f µs server CPU per answer",
				round, kind, run.AnsweredPerSec, run.Latency.P99, run.ServerUsPerAnswer)
		}
	}
	if err := floor.stop(); err != nil {
		res.note(err.Error())
	}
	reads.Medians = readMedians(reads.Runs)
	for _, r := range reads.Runs {
		if bad := r.Sent - int(r.Status["200"]+r.Status["304"]); bad > 0 {
			res.note(fmt.Sprintf("round %d %s: %d of %d GETs were not answered 200 or 304: %v", r.Round, r.Kind, bad, r.Sent, r.Status))
		}
		if r.ServerMissing != "" {
			res.note(fmt.Sprintf("round %d %s: server CPU missing: %s", r.Round, r.Kind, r.ServerMissing))
		}
	}
	if c.IfNoneMatch {
		res.note("--if-none-match: bidgate's GETs carry the last ETag the node gave; the floor has no ETag and answers 200 every time")
	}
	res.Finished = time.Now()
	return res, ctx.Err()
}

// readRun runs one kind for c.Duration at c.Rate and measures it.
func (e *Env) readRun(ctx context.Context, c ReadsConfig, kind string, round int, reads *Reads, floor *floorProc) ReadRun {
	targets, auction, sample := e.targets, reads.ColdAuction, e.cpu.sample
	switch kind {
	case ReadFloor:
		targets, sample = []Target{floor.target}, floor.sample
	case ReadHot:
		auction = reads.HotAuction
	}
	load := e.runSteady(ctx, targets, c.Rate, c.Duration, sample, func() Job {
		return Job{AuctionID: auction, Read: true, IfNoneMatch: c.IfNoneMatch, Kind: KindRead, Step: round}
	})
	recs := load.recs

	sum := Summarize(recs, load.start)
	run := ReadRun{Kind: kind, Round: round, Offered: c.Rate, Sent: len(recs), Status: map[string]int64{},
		Latency: sum.All, SendLag: sum.SendLag}
	for i := range recs {
		if recs[i].Outcome == Transport {
			run.Status["transport"]++
			continue
		}
		run.Answered++
		run.Status[strconv.Itoa(recs[i].Status)]++
	}
	if sum.Span > 0 {
		run.AnsweredPerSec = float64(run.Answered) / sum.Span
	}
	cpu := cpuBetween(load.before, load.after, int64(len(recs)), 0)
	run.WallSeconds = cpu.WallSeconds
	if cpu.Generator != nil {
		run.GenUsPerRequest = cpu.Generator.UsPerRequest
	}
	switch {
	case cpu.Server == nil:
		run.ServerMissing = cpu.ServerMissing
	default:
		run.ServerCPU = cpu.Server.Seconds
		if run.Answered > 0 {
			run.ServerUsPerAnswer = run.ServerCPU * 1e6 / float64(run.Answered)
		}
	}
	return run
}

// readMedians is each kind's medians over its runs, and its server CPU
// per answer as a multiple of the floor's.
func readMedians(runs []ReadRun) []ReadKind {
	var out []ReadKind
	for _, kind := range readKinds {
		var answered, p50, p99, mx, us []float64
		for _, r := range runs {
			if r.Kind != kind {
				continue
			}
			answered, p50, p99, mx = append(answered, r.AnsweredPerSec), append(p50, r.Latency.P50), append(p99, r.Latency.P99), append(mx, r.Latency.Max)
			if r.ServerMissing == "" && r.Answered > 0 {
				us = append(us, r.ServerUsPerAnswer)
			}
		}
		if len(answered) == 0 {
			continue
		}
		out = append(out, ReadKind{Kind: kind, Runs: len(answered), AnsweredPerSec: median(answered), P50: median(p50),
			P99: median(p99), Max: median(mx), ServerUsPerAnswer: median(us)})
	}
	if len(out) > 0 && out[0].Kind == ReadFloor && out[0].ServerUsPerAnswer > 0 {
		for i := range out {
			out[i].VsFloor = out[i].ServerUsPerAnswer / out[0].ServerUsPerAnswer
		}
	}
	return out
}

// median of xs (0 when empty); an even count takes the mean of the middle
// two.
func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Sorted(slices.Values(xs))
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}
