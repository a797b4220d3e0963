package redisstore

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"bidgate"
)

// The log is the record of a hot auction's bids: a bid-accepted message is
// only a copy of one of its entries, and the persister checks every copy
// against the entry it claims to be (LogEntries) before writing it.

// maxLogScan bounds how far LogEntries reads from a log's start for an
// entry whose message named the wrong entry id: only a message that did not
// come from the log does that, and it must not make Redis read a whole
// backlog.
const maxLogScan = 10_000

// LogQuery asks for the log entry of one bid of an auction.
type LogQuery struct {
	AuctionID, Seq int64
	Hint           string // the entry id the message names; looked at first
}

// LogCheck is what Redis knows of one LogQuery's bid.
type LogCheck int

const (
	// LogFound: the log holds the seq's entry (LogAnswer.Entry).
	LogFound LogCheck = iota
	// LogNoState: Redis holds nothing of the auction (never hot, expired
	// after closing, or lost with a Redis that lost its data).
	LogNoState
	// LogTrimmed: the seq is before the log's first entry; entries are
	// trimmed only once PostgreSQL holds a row that matches them.
	LogTrimmed
	// LogNoBid: Redis accepted no such bid: the seq is past the auction's
	// (or the entry is not where a log of consecutive seqs must have it,
	// within maxLogScan).
	LogNoBid
)

// LogAnswer is Redis's answer to one LogQuery.
type LogAnswer struct {
	Check LogCheck
	Entry bidgate.BidAccepted // with LogFound
}

// logHead is an auction's seq and first log entry, as LogEntries reads them.
type logHead struct {
	state bool
	seq   int64
	first int64 // seq of the first entry; 0: the log is empty
}

// LogEntries answers each query: the log's entry of that seq of that
// auction, or why there is none. One round trip reads every auction's seq
// and first entry and the entry each hint names; a second reads, for a
// hint that named another entry, the log from its start to the seq (every
// seq from the first entry's to the auction's is in the log, in order).
func (s *Store) LogEntries(ctx context.Context, qs []LogQuery) ([]LogAnswer, error) {
	heads, hinted, err := s.readHints(ctx, qs)
	if err != nil {
		return nil, err
	}
	out := make([]LogAnswer, len(qs))
	var scan []int // queries to find by reading from the log's start
	for i, q := range qs {
		h := heads[q.AuctionID]
		switch {
		case !h.state:
			out[i].Check = LogNoState
		case q.Seq > h.seq:
			out[i].Check = LogNoBid
		case h.first == 0 || q.Seq < h.first:
			out[i].Check = LogTrimmed
		case hinted[i] != nil && hinted[i].Seq == q.Seq:
			out[i] = LogAnswer{Check: LogFound, Entry: *hinted[i]}
		case q.Seq-h.first+1 <= maxLogScan:
			scan = append(scan, i)
		default:
			out[i].Check = LogNoBid
		}
	}
	if len(scan) == 0 {
		return out, nil
	}
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.XMessageSliceCmd, len(scan))
	for j, i := range scan {
		q := qs[i]
		cmds[j] = pipe.XRangeN(ctx, KeysOf(q.AuctionID).Log, "-", "+", q.Seq-heads[q.AuctionID].first+1)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, unavailable(fmt.Errorf("read bid logs: %w", err))
	}
	for j, i := range scan {
		out[i].Check = LogNoBid
		if entries := cmds[j].Val(); len(entries) > 0 {
			b, err := logBid(qs[i].AuctionID, entries[len(entries)-1])
			if err != nil {
				return nil, err
			}
			if b.Seq == qs[i].Seq {
				out[i] = LogAnswer{Check: LogFound, Entry: b}
			}
		}
	}
	return out, nil
}

// readHints reads, in one round trip, each auction's seq and first log
// entry, and the entries the queries' hints name (nil where there is
// none). An auction's hints in a batch are mostly consecutive entries, so
// they are read as one range; a hint the range missed (only a message
// that names another seq's entry makes one) is read on its own in a
// second round trip.
func (s *Store) readHints(ctx context.Context, qs []LogQuery) (map[int64]logHead, []*bidgate.BidAccepted, error) {
	type headCmds struct {
		seq   *redis.StringCmd
		first *redis.XMessageSliceCmd
	}
	pipe := s.rdb.Pipeline()
	hc := map[int64]headCmds{}
	spans := map[int64]*hintSpan{}
	var order []int64 // auctions with hints, in first-seen order
	for i, q := range qs {
		k := KeysOf(q.AuctionID)
		if _, ok := hc[q.AuctionID]; !ok {
			hc[q.AuctionID] = headCmds{seq: pipe.HGet(ctx, k.State, "seq"), first: pipe.XRangeN(ctx, k.Log, "-", "+", 1)}
		}
		id, err := ParseStreamID(q.Hint)
		if err != nil {
			continue
		}
		sp := spans[q.AuctionID]
		if sp == nil {
			sp = &hintSpan{from: id, to: id, low: q.Seq, high: q.Seq}
			spans[q.AuctionID] = sp
			order = append(order, q.AuctionID)
		}
		sp.add(i, id, q.Seq)
	}
	reads := make([]hintRead, 0, len(order))
	for _, a := range order {
		reads = append(reads, spans[a].reads(ctx, pipe, KeysOf(a).Log)...)
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, unavailable(fmt.Errorf("read bid logs: %w", err))
	}
	heads := make(map[int64]logHead, len(hc))
	for id, c := range hc {
		seq, err := c.seq.Int64()
		if errors.Is(err, redis.Nil) {
			heads[id] = logHead{}
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("auction %d: seq: %w", id, err)
		}
		h := logHead{state: true, seq: seq}
		if entries := c.first.Val(); len(entries) > 0 {
			b, err := logBid(id, entries[0])
			if err != nil {
				return nil, nil, err
			}
			h.first = b.Seq
		}
		heads[id] = h
	}
	hinted := make([]*bidgate.BidAccepted, len(qs))
	missed, err := takeHinted(qs, reads, hinted)
	if err != nil || len(missed) == 0 {
		return heads, hinted, err
	}
	pipe = s.rdb.Pipeline()
	reads = reads[:0]
	for _, m := range missed {
		reads = append(reads, hintRead{cmd: pipe.XRangeN(ctx, KeysOf(qs[m.query].AuctionID).Log, m.id, m.id, 1), hints: []hint{m}})
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, unavailable(fmt.Errorf("read bid logs: %w", err))
	}
	_, err = takeHinted(qs, reads, hinted)
	return heads, hinted, err
}

// maxHintSpan bounds the seqs one range read of hints may cover; a batch
// whose hints of an auction spread wider (a re-feed beside new bids) reads
// them one by one.
const maxHintSpan = 4096

// hintSpan is the hints of one auction's queries in a batch.
type hintSpan struct {
	from, to  StreamID // the lowest and highest hinted entry ids
	low, high int64    // the lowest and highest seqs asked for
	hints     []hint
}

// hint is the entry id query names, canonical (as Redis writes it).
type hint struct {
	query int
	id    string
}

func (sp *hintSpan) add(i int, id StreamID, seq int64) {
	if id.Before(sp.from) {
		sp.from = id
	}
	if sp.to.Before(id) {
		sp.to = id
	}
	sp.low, sp.high = min(sp.low, seq), max(sp.high, seq)
	sp.hints = append(sp.hints, hint{query: i, id: id.String()})
}

// reads queues the reads of the span's hinted entries: one range when the
// seqs asked for are close, else one read per hint.
func (sp *hintSpan) reads(ctx context.Context, pipe redis.Pipeliner, log string) []hintRead {
	if span := sp.high - sp.low + 1; len(sp.hints) > 1 && span <= maxHintSpan {
		return []hintRead{{cmd: pipe.XRangeN(ctx, log, sp.from.String(), sp.to.String(), span), hints: sp.hints}}
	}
	out := make([]hintRead, len(sp.hints))
	for k, h := range sp.hints {
		out[k] = hintRead{cmd: pipe.XRangeN(ctx, log, h.id, h.id, 1), hints: sp.hints[k : k+1]}
	}
	return out
}

// hintRead is one read of log entries and the hints it may hold.
type hintRead struct {
	cmd   *redis.XMessageSliceCmd
	hints []hint
}

// takeHinted sets hinted[i] to the entry query i's hint names, from reads;
// it returns the hints a range read did not hold.
func takeHinted(qs []LogQuery, reads []hintRead, hinted []*bidgate.BidAccepted) (missed []hint, err error) {
	for _, r := range reads {
		entries := r.cmd.Val()
		byID := make(map[string]int, len(entries))
		for k, e := range entries {
			byID[e.ID] = k
		}
		for _, h := range r.hints {
			k, ok := byID[h.id]
			if !ok {
				if len(r.hints) > 1 {
					missed = append(missed, h)
				}
				continue
			}
			b, err := logBid(qs[h.query].AuctionID, entries[k])
			if err != nil {
				return nil, err
			}
			hinted[h.query] = &b
		}
	}
	return missed, nil
}
