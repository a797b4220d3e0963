package bench

import (
	"math"
	"time"

	"github.com/HdrHistogram/hdrhistogram-go"
)

// Latencies are recorded in HDR histograms in microseconds, from 1µs to
// two minutes, with three significant digits (two for the per-second ones).
const histMaxUs = int64(2 * time.Minute / time.Microsecond)

func newHist(digits int) *hdrhistogram.Histogram { return hdrhistogram.New(1, histMaxUs, digits) }

func recordLatency(h *hdrhistogram.Histogram, d time.Duration) {
	us := max(1, min(histMaxUs, int64(d/time.Microsecond)))
	_ = h.RecordValue(us)
}

// Latency is the distribution of one set of requests, in milliseconds.
type Latency struct {
	Count int64   `json:"count"`
	P50   float64 `json:"p50Ms"`
	P90   float64 `json:"p90Ms"`
	P99   float64 `json:"p99Ms"`
	P999  float64 `json:"p999Ms"`
	Max   float64 `json:"maxMs"`
}

func latencyOf(h *hdrhistogram.Histogram) Latency {
	if h.TotalCount() == 0 {
		return Latency{}
	}
	ms := func(us int64) float64 { return float64(us) / 1000 }
	return Latency{Count: h.TotalCount(), P50: ms(h.ValueAtQuantile(50)), P90: ms(h.ValueAtQuantile(90)),
		P99: ms(h.ValueAtQuantile(99)), P999: ms(h.ValueAtQuantile(99.9)), Max: ms(h.Max())}
}

// SecondStat is one second of the run, by intended send time.
type SecondStat struct {
	Second   int     `json:"second"`
	Requests int64   `json:"requests"`
	Created  int64   `json:"created"`
	Errors   int64   `json:"errors"` // 5xx and transport
	P50      float64 `json:"p50Ms"`
	P99      float64 `json:"p99Ms"`
	Max      float64 `json:"maxMs"`
}

// Bucket is one bar of the latency histogram chart (log-spaced, ten per
// decade).
type Bucket struct {
	FromMs float64 `json:"fromMs"`
	ToMs   float64 `json:"toMs"`
	Count  int64   `json:"count"`
}

// Summary is the latency picture of a set of records.
type Summary struct {
	// Requests counts every record; All is the latency of the answered
	// ones (deliberate short timeouts are only in ByOutcome).
	Requests  int64               `json:"requests"`
	All       Latency             `json:"all"`
	ByOutcome map[Outcome]Latency `json:"byOutcome"`
	// SendLag is how late requests left against their intended time (queue
	// and pool wait): large values mean the generator or pool was the limit.
	SendLag Latency      `json:"sendLag"`
	Seconds []SecondStat `json:"perSecond"`
	Buckets []Bucket     `json:"histogram"`
	// Span is the time from the first intended send to the last answer.
	Span float64 `json:"spanSeconds"`
	// Rate is answers per second of Span, Accepted the 201s per second.
	Rate     float64 `json:"requestsPerSecond"`
	Accepted float64 `json:"acceptedPerSecond"`
}

// Count is the number of records of outcome o.
func (s Summary) Count(o Outcome) int64 { return s.ByOutcome[o].Count }

// Errors is the number of 5xx and transport errors.
func (s Summary) Errors() int64 { return s.Count(ServerError) + s.Count(Transport) }

// Summarize builds the histograms of recs; per-second buckets count from t0.
func Summarize(recs []Record, t0 time.Time) Summary {
	all, lag := newHist(3), newHist(3)
	by := map[Outcome]*hdrhistogram.Histogram{}
	type second struct {
		h                         *hdrhistogram.Histogram
		requests, created, errors int64
	}
	var secs []*second
	const decade = 10
	bucketAt := func(d time.Duration) int {
		ms := math.Max(float64(d)/float64(time.Millisecond), 0.01)
		return int(math.Floor(math.Log10(ms) * decade))
	}
	buckets := map[int]int64{}
	var first, last time.Time
	var created int64
	var answered int64
	for i := range recs {
		r := &recs[i]
		h := by[r.Outcome]
		if h == nil {
			h = newHist(3)
			by[r.Outcome] = h
		}
		recordLatency(h, r.Latency)
		if r.Outcome == PlannedTimeout {
			continue // its latency is the timeout we chose, not an answer's
		}
		answered++
		recordLatency(all, r.Latency)
		if !r.Sent.IsZero() {
			recordLatency(lag, max(0, r.Sent.Sub(r.Intended)))
		}
		buckets[bucketAt(r.Latency)]++
		if first.IsZero() || r.Intended.Before(first) {
			first = r.Intended
		}
		if end := r.Intended.Add(r.Latency); end.After(last) {
			last = end
		}
		if r.Outcome == Created {
			created++
		}
		n := int(r.Intended.Sub(t0) / time.Second)
		if n < 0 {
			n = 0
		}
		for len(secs) <= n {
			secs = append(secs, nil)
		}
		s := secs[n]
		if s == nil {
			s = &second{h: newHist(2)}
			secs[n] = s
		}
		recordLatency(s.h, r.Latency)
		s.requests++
		if r.Outcome == Created {
			s.created++
		}
		if r.Outcome.IsError() {
			s.errors++
		}
	}
	sum := Summary{Requests: int64(len(recs)), All: latencyOf(all), ByOutcome: map[Outcome]Latency{}, SendLag: latencyOf(lag)}
	for o, h := range by {
		sum.ByOutcome[o] = latencyOf(h)
	}
	for i, s := range secs {
		st := SecondStat{Second: i}
		if s != nil {
			l := latencyOf(s.h)
			st.Requests, st.Created, st.Errors, st.P50, st.P99, st.Max = s.requests, s.created, s.errors, l.P50, l.P99, l.Max
		}
		sum.Seconds = append(sum.Seconds, st)
	}
	if len(buckets) > 0 {
		lo, hi := math.MaxInt, math.MinInt
		for b := range buckets {
			lo, hi = min(lo, b), max(hi, b)
		}
		for b := lo; b <= hi; b++ {
			sum.Buckets = append(sum.Buckets, Bucket{FromMs: math.Pow(10, float64(b)/decade),
				ToMs: math.Pow(10, float64(b+1)/decade), Count: buckets[b]})
		}
	}
	if span := last.Sub(first).Seconds(); span > 0 {
		sum.Span = span
		sum.Rate = float64(answered) / span
		sum.Accepted = float64(created) / span
	}
	return sum
}
