package bench

import (
	"reflect"
	"slices"
	"strings"
	"time"
)

// Result is everything a run produced: the JSON file is this, the text and
// HTML reports are views of it.
type Result struct {
	Scenario string    `json:"scenario"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	Targets  []string  `json:"targets"`
	Seed     uint64    `json:"seed"`
	Settings any       `json:"settings"`
	// MetricsURLs are the nodes' Prometheus endpoints the server's CPU was
	// read from.
	MetricsURLs []string `json:"metricsUrls,omitempty"`
	// Bidders is how many distinct bidder ids the load used, BidderRate the
	// bids per second each one sent (bidgate limits one to 5/s by default).
	Bidders    int       `json:"bidders"`
	BidderRate float64   `json:"bidsPerSecondPerBidder"`
	LoadStart  time.Time `json:"loadStart"`

	Latency    Summary         `json:"latency"`
	Warmup     *Summary        `json:"warmup,omitempty"` // the flash sale's warm-up, left out of Latency
	CPU        *CPU            `json:"cpu,omitempty"`    // a flash sale's load as a whole (ramps: per step)
	Hot        []AuctionLoad   `json:"hotAuctions,omitempty"`
	Cold       *ColdLoad       `json:"cold,omitempty"`
	Ramp       *Ramp           `json:"ramp,omitempty"`
	CloseBurst *CloseBurst     `json:"closeBurst,omitempty"`
	Viewers    *ViewersResult  `json:"viewers,omitempty"`
	Pollers    *PollersResult  `json:"pollers,omitempty"`
	Inboxes    *InboxesResult  `json:"inboxes,omitempty"`
	Reads      *Reads          `json:"reads,omitempty"`
	Browse     *Browse         `json:"browse,omitempty"`
	Floor      *FlashSaleFloor `json:"floor,omitempty"` // a flash sale's --floor
	Limits     []Limit         `json:"limits,omitempty"`
	Ratios     []Ratio         `json:"ratios,omitempty"`
	Drain      *Drain          `json:"drain,omitempty"`
	Checks     []Check         `json:"checks"`
	Notes      []string        `json:"notes,omitempty"`
	Files      Files           `json:"files"`

	records []Record
}

// Files are the outputs of a run.
type Files struct {
	JSON    string `json:"json,omitempty"`
	HTML    string `json:"html,omitempty"`
	Records string `json:"records,omitempty"`
}

// Records are the run's requests (not part of the JSON result; see
// WriteRecords).
func (r *Result) Records() []Record { return r.records }

// Passed reports whether every check passed.
func (r *Result) Passed() bool {
	for _, c := range r.Checks {
		if !c.Pass {
			return false
		}
	}
	return true
}

// Failed lists the checks that failed.
func (r *Result) Failed() []Check {
	var out []Check
	for _, c := range r.Checks {
		if !c.Pass {
			out = append(out, c)
		}
	}
	return out
}

func (r *Result) note(s string) { r.Notes = append(r.Notes, s) }

// AuctionLoad is what one hot auction took.
type AuctionLoad struct {
	ID             int64             `json:"id"`
	Offered        float64           `json:"offeredPerSecond"`
	Sent           int               `json:"sent"`
	Outcomes       map[Outcome]int64 `json:"outcomes"`
	AcceptedPerSec float64           `json:"acceptedPerSecond"`
	OriginalEnd    time.Time         `json:"originalEnd"`
	FinalEnd       time.Time         `json:"finalEnd"`
	Extensions     int               `json:"extensions"` // accepted bids that moved the end
	LateSent       int               `json:"lateSent"`
	LateRefused    int               `json:"lateRefused"`
}

// ColdLoad is what the cold auctions took together.
type ColdLoad struct {
	Auctions       int               `json:"auctions"`
	CreatedVia     string            `json:"createdVia"`
	CreateSeconds  float64           `json:"createSeconds"`
	EndingInRun    int               `json:"endingInRun"`
	Offered        float64           `json:"offeredPerSecond"`
	Sent           int               `json:"sent"`
	Outcomes       map[Outcome]int64 `json:"outcomes"`
	AcceptedPerSec float64           `json:"acceptedPerSecond"`
	LateSent       int               `json:"lateSent"`
	LateRefused    int               `json:"lateRefused"`
}

// tally counts the outcomes of recs for which keep is true.
func tally(recs []Record, keep func(*Record) bool) (sent int, out map[Outcome]int64, lateSent, lateRefused int) {
	out = map[Outcome]int64{}
	for i := range recs {
		r := &recs[i]
		if !keep(r) {
			continue
		}
		if r.Kind == KindLate {
			lateSent++
			if r.Outcome == Conflict {
				lateRefused++
			}
			continue
		}
		sent++
		out[r.Outcome]++
	}
	return sent, out, lateSent, lateRefused
}

// endOf is the latest end an auction's answers reported (or its original
// end), and how many accepted bids moved it.
func endOf(spec AuctionSpec, recs []Record) (time.Time, int) {
	var accepted []Record
	for _, r := range recs {
		if r.AuctionID == spec.ID && (r.Outcome == Created || r.Outcome == Replayed) {
			accepted = append(accepted, r)
		}
	}
	slices.SortFunc(accepted, func(a, b Record) int { return int(a.Seq - b.Seq) })
	end, moved := spec.OriginalEnd, 0
	var lastSeq int64
	for _, r := range accepted {
		if r.EndTime.After(end) {
			end = r.EndTime
			if r.Seq != lastSeq {
				moved++
			}
		}
		lastSeq = r.Seq
	}
	return end, moved
}

// settingsOf turns a scenario config into a map for the result, with
// durations written the way the flags take them ("60s", not nanoseconds).
func settingsOf(v any) map[string]any {
	out := map[string]any{}
	rv := reflect.ValueOf(v)
	rt := rv.Type()
	for i := range rt.NumField() {
		f := rt.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "" || name == "-" {
			name = f.Name
		}
		if d, ok := rv.Field(i).Interface().(time.Duration); ok {
			out[name] = d.String()
			continue
		}
		out[name] = rv.Field(i).Interface()
	}
	return out
}
