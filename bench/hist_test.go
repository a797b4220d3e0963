package bench

import (
	"testing"
	"time"
)

func TestSummarize(t *testing.T) {
	var recs []Record
	start := time.Unix(1_700_000_000, 0)
	// 100 answers per second for 3 seconds, latency i ms; every 10th a 409,
	// one transport error.
	for s := range 3 {
		for i := 1; i <= 100; i++ {
			o := Created
			if i%10 == 0 {
				o = Conflict
			}
			intended := start.Add(time.Duration(s)*time.Second + time.Duration(i-1)*10*time.Millisecond)
			recs = append(recs, Record{Outcome: o, Intended: intended, Sent: intended.Add(100 * time.Microsecond),
				Latency: time.Duration(i) * time.Millisecond})
		}
	}
	recs = append(recs, Record{Outcome: Transport, Intended: start, Latency: 10 * time.Second})
	s := Summarize(recs, start)
	if s.All.Count != 301 || s.Count(Created) != 270 || s.Count(Conflict) != 30 || s.Errors() != 1 {
		t.Fatalf("counts: %+v", s.ByOutcome)
	}
	if p := s.ByOutcome[Created].P50; p < 49 || p > 51 {
		t.Errorf("p50 of 201 = %v ms, want about 50", p)
	}
	if p := s.All.Max; p < 9990 || p > 10010 {
		t.Errorf("max = %v ms, want about 10000", p)
	}
	if len(s.Seconds) != 3 || s.Seconds[0].Requests != 101 || s.Seconds[1].Requests != 100 || s.Seconds[0].Errors != 1 || s.Seconds[2].Created != 90 {
		t.Errorf("per second: %+v", s.Seconds)
	}
	if s.SendLag.P99 < 0.09 || s.SendLag.P99 > 0.11 {
		t.Errorf("send lag p99 = %v ms, want 0.1", s.SendLag.P99)
	}
	var n int64
	for _, b := range s.Buckets {
		n += b.Count
		if b.FromMs >= b.ToMs {
			t.Errorf("bucket %+v", b)
		}
	}
	if n != 301 {
		t.Errorf("histogram holds %d, want 301", n)
	}
}
