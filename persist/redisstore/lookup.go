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
// entry, and the entry each query's hint names (nil when there is none).
func (s *Store) readHints(ctx context.Context, qs []LogQuery) (map[int64]logHead, []*bidgate.BidAccepted, error) {
	type headCmds struct {
		seq   *redis.StringCmd
		first *redis.XMessageSliceCmd
	}
	pipe := s.rdb.Pipeline()
	hc := map[int64]headCmds{}
	hints := make([]*redis.XMessageSliceCmd, len(qs))
	for i, q := range qs {
		k := KeysOf(q.AuctionID)
		if _, ok := hc[q.AuctionID]; !ok {
			hc[q.AuctionID] = headCmds{seq: pipe.HGet(ctx, k.State, "seq"), first: pipe.XRangeN(ctx, k.Log, "-", "+", 1)}
		}
		if id, err := ParseStreamID(q.Hint); err == nil {
			hints[i] = pipe.XRangeN(ctx, k.Log, id.String(), id.String(), 1)
		}
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
	for i, c := range hints {
		if c == nil || len(c.Val()) == 0 {
			continue
		}
		b, err := logBid(qs[i].AuctionID, c.Val()[0])
		if err != nil {
			return nil, nil, err
		}
		hinted[i] = &b
	}
	return heads, hinted, nil
}
