package redisstore

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"bidgate"
)

// A hot auction's log holds its accepted bids, added by bid_batch.lua in
// the step that accepted them; the relay produces them to Kafka, and the
// reconciler and closer write them to PostgreSQL when Kafka did not.

var (
	//go:embed lua/set_max_id.lua
	setMaxIDLua    string
	setMaxIDScript = redis.NewScript(setMaxIDLua)
	//go:embed lua/set_max_seq.lua
	setMaxSeqLua    string
	setMaxSeqScript = redis.NewScript(setMaxSeqLua)
)

// logBid reads one log entry as the bid it records.
func logBid(auctionID int64, e redis.XMessage) (bidgate.BidAccepted, error) {
	num := func(f string) (int64, error) {
		s, _ := e.Values[f].(string)
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("auction %d log entry %s: field %s = %q", auctionID, e.ID, f, s)
		}
		return n, nil
	}
	b := bidgate.BidAccepted{AuctionID: auctionID, StreamID: e.ID}
	var cents, atUs, endUs int64
	var err error
	for _, f := range []struct {
		name string
		dst  *int64
	}{{"seq", &b.Seq}, {"bidder", &b.BidderID}, {"amount", &cents}, {"at_us", &atUs}, {"end_us", &endUs}} {
		if *f.dst, err = num(f.name); err != nil {
			return b, err
		}
	}
	b.RequestID, _ = e.Values["req"].(string)
	b.Amount = bidgate.FormatMoney(bidgate.FromCents(cents))
	b.Kind = bidgate.KindStraight // the default, left out of the entry
	if kind, ok := e.Values["kind"].(string); ok {
		b.Kind = bidgate.BidKind(kind)
	}
	if b.Kind == bidgate.KindProxy {
		max, err := num("max")
		if err != nil {
			return b, err
		}
		b.MaxAmount = bidgate.FormatMoney(bidgate.FromCents(max))
	}
	if _, ok := e.Values["outbid"]; ok {
		if b.Outbid, err = num("outbid"); err != nil {
			return b, err
		}
		max, err := num("outbid_max")
		if err != nil {
			return b, err
		}
		b.OutbidMax = bidgate.FormatMoney(bidgate.FromCents(max))
	}
	b.AcceptedAt, b.EndTime = time.UnixMicro(atUs).UTC(), time.UnixMicro(endUs).UTC()
	return b, nil
}

func logBids(auctionID int64, entries []redis.XMessage) ([]bidgate.BidAccepted, error) {
	bids := make([]bidgate.BidAccepted, len(entries))
	for i, e := range entries {
		b, err := logBid(auctionID, e)
		if err != nil {
			return nil, err
		}
		bids[i] = b
	}
	return bids, nil
}

// ReadLog returns the bids of an auction's log whose seq is past after, in
// order. The log is trimmed only up to the persisted position, so reading
// from its start costs little.
func (s *Store) ReadLog(ctx context.Context, auctionID, after int64) ([]bidgate.BidAccepted, error) {
	const step = 1000
	var bids []bidgate.BidAccepted
	from := "-"
	for {
		entries, err := s.rdb.XRangeN(ctx, KeysOf(auctionID).Log, from, "+", step).Result()
		if err != nil {
			return nil, unavailable(fmt.Errorf("read the bid log of auction %d: %w", auctionID, err))
		}
		page, err := logBids(auctionID, entries)
		if err != nil {
			return nil, err
		}
		for _, b := range page {
			if b.Seq > after {
				bids = append(bids, b)
			}
		}
		if len(entries) < step {
			return bids, nil
		}
		from = "(" + entries[len(entries)-1].ID
	}
}

// LogRange asks for up to a step of an auction's log from an entry on.
type LogRange struct {
	AuctionID int64
	From      StreamID // first entry id to read
}

// ReadLogs reads up to limit entries of each range, in one round trip.
func (s *Store) ReadLogs(ctx context.Context, ranges []LogRange, limit int) ([][]bidgate.BidAccepted, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.XMessageSliceCmd, len(ranges))
	for i, r := range ranges {
		cmds[i] = pipe.XRangeN(ctx, KeysOf(r.AuctionID).Log, r.From.String(), "+", int64(limit))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, unavailable(fmt.Errorf("read bid logs: %w", err))
	}
	out := make([][]bidgate.BidAccepted, len(ranges))
	for i, r := range ranges {
		bids, err := logBids(r.AuctionID, cmds[i].Val())
		if err != nil {
			return nil, err
		}
		out[i] = bids
	}
	return out, nil
}

// Cursor is what the relay keeps of an auction's log.
type Cursor struct {
	Relayed   StreamID // last entry produced to Kafka (zero: none)
	Persisted int64    // every bid up to this seq is in PostgreSQL
	Last      StreamID // newest entry (zero: the log is empty)
	LastSeq   int64
}

// Cursors reads each auction's relayed cursor, persisted position and
// newest log entry, in one round trip.
func (s *Store) Cursors(ctx context.Context, ids []int64) ([]Cursor, error) {
	type cmds struct {
		relayed, persisted *redis.StringCmd
		last               *redis.XMessageSliceCmd
	}
	pipe := s.rdb.Pipeline()
	cs := make([]cmds, len(ids))
	for i, id := range ids {
		k := KeysOf(id)
		cs[i] = cmds{relayed: pipe.Get(ctx, k.Relayed), persisted: pipe.Get(ctx, k.Persisted),
			last: pipe.XRevRangeN(ctx, k.Log, "+", "-", 1)}
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return nil, unavailable(fmt.Errorf("read relay cursors: %w", err))
	}
	out := make([]Cursor, len(ids))
	for i, id := range ids {
		c := &out[i]
		c.Persisted = position(cs[i].persisted)
		if err := cs[i].relayed.Err(); err == nil {
			if c.Relayed, err = ParseStreamID(cs[i].relayed.Val()); err != nil {
				return nil, fmt.Errorf("auction %d relayed cursor: %w", id, err)
			}
		} else if !errors.Is(err, redis.Nil) {
			return nil, unavailable(fmt.Errorf("auction %d relayed cursor: %w", id, err))
		}
		if entries := cs[i].last.Val(); len(entries) == 1 {
			last, err := logBid(id, entries[0])
			if err != nil {
				return nil, err
			}
			if c.Last, err = ParseStreamID(last.StreamID); err != nil {
				return nil, fmt.Errorf("auction %d: %w", id, err)
			}
			c.LastSeq = last.Seq
		}
	}
	return out, nil
}

// position reads a persisted position as set_max_seq.lua keeps it; none
// (or anything else) is 0.
func position(c *redis.StringCmd) int64 {
	n, err := c.Int64()
	if err != nil {
		return 0
	}
	return n
}

// Relayed is an auction's new relayed cursor.
type Relayed struct {
	AuctionID int64
	To        StreamID
}

// AdvanceRelayed moves relayed cursors forward (never back), in one round
// trip.
func (s *Store) AdvanceRelayed(ctx context.Context, cursors []Relayed) error {
	pipe := s.rdb.Pipeline()
	for _, c := range cursors {
		setMaxIDScript.Eval(ctx, pipe, []string{KeysOf(c.AuctionID).Relayed}, c.To.String())
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return unavailable(fmt.Errorf("advance relayed cursors: %w", err))
	}
	return nil
}

// ResetRelayed drops relayed cursors, so that the logs are produced again
// from their start (trimmed up to about the persisted position).
func (s *Store) ResetRelayed(ctx context.Context, ids []int64) error {
	pipe := s.rdb.Pipeline()
	for _, id := range ids {
		pipe.Del(ctx, KeysOf(id).Relayed)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return unavailable(fmt.Errorf("reset relayed cursors: %w", err))
	}
	return nil
}

// Persisted is an auction's persisted position, and how far its log may be
// trimmed (zero: not at all).
type Persisted struct {
	AuctionID int64
	Seq       int64
	TrimTo    StreamID // entries before this id are in PostgreSQL
}

// RecordPersisted raises persisted positions (never lowers them) and trims
// logs, in one round trip. Both only ever drop what PostgreSQL holds, so a
// position read a moment ago is safe to use.
func (s *Store) RecordPersisted(ctx context.Context, positions []Persisted) error {
	pipe := s.rdb.Pipeline()
	for _, p := range positions {
		k := KeysOf(p.AuctionID)
		setMaxSeqScript.Eval(ctx, pipe, []string{k.Persisted}, p.Seq)
		if p.TrimTo != (StreamID{}) {
			pipe.XTrimMinID(ctx, k.Log, p.TrimTo.String())
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return unavailable(fmt.Errorf("record persisted positions: %w", err))
	}
	return nil
}

// Head is the start of an auction's log as the reconciler sees it.
type Head struct {
	Found   bool  // Redis has the auction's state
	Seq     int64 // bids accepted
	Entries []bidgate.BidAccepted
}

// Heads reads Redis's time (Unix microseconds) and, per auction, its seq
// and up to limit entries from the start of its log, in one round trip.
func (s *Store) Heads(ctx context.Context, ids []int64, limit int) (nowUs int64, heads []Head, err error) {
	pipe := s.rdb.Pipeline()
	clock := pipe.Time(ctx)
	seqs := make([]*redis.StringCmd, len(ids))
	logs := make([]*redis.XMessageSliceCmd, len(ids))
	for i, id := range ids {
		k := KeysOf(id)
		seqs[i] = pipe.HGet(ctx, k.State, "seq")
		logs[i] = pipe.XRangeN(ctx, k.Log, "-", "+", int64(limit))
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return 0, nil, unavailable(fmt.Errorf("read bid logs: %w", err))
	}
	heads = make([]Head, len(ids))
	for i, id := range ids {
		seq, err := seqs[i].Int64()
		if errors.Is(err, redis.Nil) {
			continue // no state in Redis: no hot bid to miss
		}
		if err != nil {
			return 0, nil, fmt.Errorf("auction %d: seq: %w", id, err)
		}
		entries, err := logBids(id, logs[i].Val())
		if err != nil {
			return 0, nil, err
		}
		heads[i] = Head{Found: true, Seq: seq, Entries: entries}
	}
	return clock.Val().UnixMicro(), heads, nil
}
