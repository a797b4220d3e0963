package redisstore

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"bidgate"
)

var (
	//go:embed lua/load_state.lua
	loadStateLua    string
	loadStateScript = redis.NewScript(loadStateLua)
)

// record is a bid as bid_batch.lua keeps it under its request id, with the
// state right after it, so that a replay is answered like the original (a
// straight bid that led is kept short: seq|at|end|bidder|amount). Lua
// writes it on the hot path; Load writes it here for bids PostgreSQL holds
// (TestRecordCodec pins the two together).
func record(r bidgate.BidResult) string {
	b := r.Bid
	if b.Kind == "" {
		b.Kind = bidgate.KindStraight
	}
	leading := "0"
	if r.Leading {
		leading = "1"
	}
	var maxCents int64
	if b.Kind == bidgate.KindProxy {
		maxCents = bidgate.Cents(b.MaxAmount.Decimal)
	}
	rec := strconv.FormatInt(b.Seq, 10) + "|" + strconv.FormatInt(b.AcceptedAt.UnixMicro(), 10) + "|" +
		strconv.FormatInt(b.EndTime.UnixMicro(), 10) + "|" + strconv.FormatInt(b.BidderID, 10) + "|" +
		strconv.FormatInt(bidgate.Cents(b.Amount), 10)
	if b.Kind == bidgate.KindStraight && r.Leading {
		return rec // the short form
	}
	return rec + "|" + string(b.Kind) + "|" + strconv.FormatInt(maxCents, 10) + "|" + leading + "|" +
		strconv.FormatInt(bidgate.Cents(r.CurrentPrice), 10)
}

// results turns an auction's rows into the answers their requests got:
// a bid answered by an automatic row did not lead, and the automatic
// row's amount was the price after it. Automatic rows answer no request.
func results(bids []bidgate.Bid) []bidgate.BidResult {
	auto := make(map[uuid.UUID]bidgate.Bid)
	for _, b := range bids {
		if b.Kind == bidgate.KindAutomatic {
			auto[b.RequestID] = b
		}
	}
	out := make([]bidgate.BidResult, 0, len(bids))
	for _, b := range bids {
		if b.Kind == bidgate.KindAutomatic {
			continue
		}
		r := bidgate.BidResult{Bid: b, Leading: true, CurrentPrice: b.Amount}
		if a, ok := auto[bidgate.AutomaticRequestID(b.RequestID)]; ok {
			r.Leading, r.CurrentPrice = false, a.Amount
		}
		out = append(out, r)
	}
	return out
}

// Load writes a hot auction's state and the request records of the bids
// PostgreSQL holds into Redis. With overwrite false it writes only when
// Redis has no state (once Redis has it, Redis is ahead of PostgreSQL and
// wins); promotion overwrites, under the PostgreSQL row lock. It reports
// whether it wrote.
func (s *Store) Load(ctx context.Context, a bidgate.Auction, bids []bidgate.Bid, overwrite bool) (bool, error) {
	force := "0"
	if overwrite {
		force = "1"
	}
	leader := ""
	if a.LeaderID != 0 {
		leader = strconv.FormatInt(a.LeaderID, 10)
	}
	var maxEndUs, reserve, buyNow int64 // 0: no cap, no reserve, no buy-now
	if !a.MaxEndTime.IsZero() {
		maxEndUs = a.MaxEndTime.UnixMicro()
	}
	if a.ReservePrice.Valid {
		reserve = bidgate.Cents(a.ReservePrice.Decimal)
	}
	if a.BuyNowPrice.Valid {
		buyNow = bidgate.Cents(a.BuyNowPrice.Decimal)
	}
	args := []any{force,
		"price", bidgate.Cents(a.CurrentPrice), "inc", bidgate.Cents(a.MinIncrement), "leader", leader,
		"end_us", a.EndTime.UnixMicro(), "status", string(a.Status),
		"window_us", a.ExtendWindow.Microseconds(), "by_us", a.ExtendBy.Microseconds(), "seq", a.BidCount,
		"seller", a.SellerID, "max_end_us", maxEndUs, "lmax", bidgate.Cents(a.LeaderMax), "reserve", reserve,
		"buy_now", buyNow, "lalias", aliasField(a.LeaderAlias)}
	aliases := bidgate.AliasesOf(bids)
	if a.LeaderID != 0 && aliases[a.LeaderID] != 0 {
		args[len(args)-1] = aliasField(aliases[a.LeaderID])
	}
	args = append(args, len(aliases))
	for bidder, alias := range aliases {
		args = append(args, bidder, alias)
	}
	for _, r := range results(bids) {
		args = append(args, r.Bid.RequestID.String(), record(r))
	}
	k := KeysOf(a.ID)
	n, err := loadStateScript.Run(ctx, s.rdb, []string{k.State, k.Reqs, k.Aliases}, args...).Int()
	if err != nil {
		return false, unavailable(fmt.Errorf("write auction %d to Redis: %w", a.ID, err))
	}
	return n == 1, nil
}

// aliasField is how the state hash and the update line keep an alias: ""
// for none or unknown.
func aliasField(alias int64) string {
	if alias <= 0 {
		return ""
	}
	return strconv.FormatInt(alias, 10)
}

// State is the live part of a hot auction's state.
type State struct {
	PriceCents  int64
	LeaderID    int64 // 0: nobody
	LeaderAlias int64 // 0: nobody, or a state written before aliases
	EndUs       int64
	Status      bidgate.Status
	Seq         int64
}

// Apply overlays the live state on an auction as PostgreSQL has it.
func (st State) Apply(a bidgate.Auction) bidgate.Auction {
	a.CurrentPrice, a.LeaderID, a.LeaderAlias, a.Status = bidgate.FromCents(st.PriceCents), st.LeaderID, st.LeaderAlias, st.Status
	a.EndTime, a.BidCount = time.UnixMicro(st.EndUs).UTC(), st.Seq
	return a
}

var stateFields = []string{"price", "leader", "end_us", "status", "seq", "lalias"}

// States reads the live state of hot auctions in one round trip; an
// auction Redis has no state for is absent from the map.
func (s *Store) States(ctx context.Context, ids ...int64) (map[int64]State, error) {
	pipe := s.rdb.Pipeline()
	cmds := make([]*redis.SliceCmd, len(ids))
	for i, id := range ids {
		cmds[i] = pipe.HMGet(ctx, KeysOf(id).State, stateFields...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, unavailable(fmt.Errorf("read %d auctions from Redis: %w", len(ids), err))
	}
	states := make(map[int64]State, len(ids))
	for i, id := range ids {
		v := cmds[i].Val()
		if v[0] == nil {
			continue
		}
		st, err := parseState(v)
		if err != nil {
			return nil, fmt.Errorf("auction %d in Redis: %w", id, err)
		}
		states[id] = st
	}
	return states, nil
}

func parseState(v []any) (State, error) {
	var st State
	var err error
	for i, dst := range []*int64{&st.PriceCents, nil, &st.EndUs, nil, &st.Seq} {
		if dst != nil {
			if *dst, err = intReply(v[i]); err != nil {
				return st, fmt.Errorf("field %s: %w", stateFields[i], err)
			}
		}
	}
	if st.LeaderID, err = idReply(v[1]); err != nil {
		return st, fmt.Errorf("leader: %w", err)
	}
	if st.LeaderAlias, err = idReply(v[5]); err != nil {
		return st, fmt.Errorf("lalias: %w", err)
	}
	status, _ := v[3].(string)
	st.Status = bidgate.Status(status)
	return st, nil
}

// State reads one hot auction's live state; it fails with ErrNoState.
func (s *Store) State(ctx context.Context, id int64) (State, error) {
	states, err := s.States(ctx, id)
	if err != nil {
		return State{}, err
	}
	st, ok := states[id]
	if !ok {
		return State{}, ErrNoState
	}
	return st, nil
}

// Expire gives closed auctions' keys a time to live.
func (s *Store) Expire(ctx context.Context, ttl time.Duration, ids ...int64) error {
	pipe := s.rdb.Pipeline()
	for _, id := range ids {
		for _, key := range KeysOf(id).all() {
			pipe.Expire(ctx, key, ttl)
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("expire %d auctions' keys: %w", len(ids), err)
	}
	return nil
}

// Delete removes auctions' keys (scratch auctions of the load-test
// harness): one DEL per auction, whose keys share a hash slot, so that it
// works on a Redis Cluster too.
func (s *Store) Delete(ctx context.Context, ids ...int64) error {
	pipe := s.rdb.Pipeline()
	for _, id := range ids {
		pipe.Del(ctx, KeysOf(id).all()...)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("delete %d auctions' keys: %w", len(ids), err)
	}
	return nil
}
