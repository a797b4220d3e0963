package redisstore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"bidgate"
)

// An auction's state after every change is published on its channel, as
// one line the batch script can build without a JSON encoder:
//
//	u1|auction|price cents|leader or ""|end_us|status|seq|updated_us[|mode[|leader alias]]
//
// The Go encoder below and bid_batch.lua write it; Update decodes it. The
// mode is written only by a promotion, whose state is otherwise the one
// readers hold: a node that parses only eight fields drops that message
// alone (it tells its viewers nothing new). The leader's alias (empty:
// unknown) follows, after a mode that is empty but for a promotion; a node
// that parses only nine fields drops those messages, and its read cache
// then serves states up to --read-cache-max-age old until it is upgraded.

// Channel is the sharded pub/sub channel (SPUBLISH, SSUBSCRIBE) of auction
// id's state updates. It carries the auction's hash tag: on a Redis Cluster
// it lives on the primary that holds the auction's keys, so the scripts that
// change the state may publish it, and only that primary's subscribers hear
// it (a plain PUBLISH goes to every node of the cluster).
func Channel(id int64) string { return "auction:{" + strconv.FormatInt(id, 10) + "}:updates" }

// auctionOfChannel is Channel's inverse.
func auctionOfChannel(channel string) (int64, bool) {
	rest, ok := strings.CutPrefix(channel, "auction:{")
	if !ok {
		return 0, false
	}
	digits, ok := strings.CutSuffix(rest, "}:updates")
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(digits, 10, 64)
	return id, err == nil && id > 0
}

// Update is one state update.
type Update struct {
	AuctionID  int64
	PriceCents int64
	LeaderID   int64 // 0: nobody
	// LeaderAlias is the leader's public name (bidgate.Auction); 0: nobody
	// or unknown.
	LeaderAlias int64
	EndUs       int64
	Status      bidgate.Status
	Seq         int64 // the bid count; only rises
	UpdatedUs   int64 // when the serializing store made this state
	// Mode is set by a promotion only (HOT); empty: unchanged.
	Mode bidgate.Mode
}

// UpdateOf is the update for an auction's state made at updated
// (zero: unknown).
func UpdateOf(a bidgate.Auction, updated time.Time) Update {
	u := Update{AuctionID: a.ID, PriceCents: bidgate.Cents(a.CurrentPrice), LeaderID: a.LeaderID,
		LeaderAlias: a.LeaderAlias, EndUs: a.EndTime.UnixMicro(), Status: a.Status, Seq: a.BidCount}
	if !updated.IsZero() {
		u.UpdatedUs = updated.UnixMicro()
	}
	return u
}

func (u Update) encode() string {
	leader := ""
	if u.LeaderID != 0 {
		leader = strconv.FormatInt(u.LeaderID, 10)
	}
	line := fmt.Sprintf("u1|%d|%d|%s|%d|%s|%d|%d", u.AuctionID, u.PriceCents, leader, u.EndUs, u.Status, u.Seq, u.UpdatedUs)
	if u.Mode != "" || u.LeaderAlias != 0 {
		line += "|" + string(u.Mode)
	}
	if u.LeaderAlias != 0 {
		line += "|" + aliasField(u.LeaderAlias)
	}
	return line
}

// ParseUpdate decodes a message of a state-update channel.
func ParseUpdate(msg string) (Update, error) {
	f := strings.Split(msg, "|")
	if len(f) < 8 || len(f) > 10 || f[0] != "u1" {
		return Update{}, errors.New("not a state update")
	}
	var u Update
	if len(f) >= 9 {
		switch u.Mode = bidgate.Mode(f[8]); {
		case u.Mode == bidgate.ModeCold, u.Mode == bidgate.ModeHot:
		case u.Mode == "" && len(f) == 10:
		default:
			return Update{}, fmt.Errorf("state update: bad mode %q", f[8])
		}
	}
	var err error
	if len(f) == 10 {
		if u.LeaderAlias, err = idReply(f[9]); err != nil {
			return Update{}, fmt.Errorf("state update: alias: %w", err)
		}
	}
	for i, dst := range []*int64{&u.AuctionID, &u.PriceCents, nil, &u.EndUs, nil, &u.Seq, &u.UpdatedUs} {
		if dst == nil {
			continue
		}
		if *dst, err = strconv.ParseInt(f[i+1], 10, 64); err != nil || *dst < 0 {
			return Update{}, fmt.Errorf("state update: bad field %d", i+1)
		}
	}
	if u.LeaderID, err = idReply(f[3]); err != nil {
		return Update{}, fmt.Errorf("state update: %w", err)
	}
	switch u.Status = bidgate.Status(f[5]); u.Status {
	case bidgate.StatusOpen, bidgate.StatusClosed, bidgate.StatusCancelled:
	default:
		return Update{}, fmt.Errorf("state update: bad status %q", f[5])
	}
	if u.AuctionID == 0 {
		return Update{}, errors.New("state update: no auction")
	}
	return u, nil
}

// StateUpdate is the update as viewers receive it.
func (u Update) StateUpdate() bidgate.StateUpdate {
	a := bidgate.Auction{ID: u.AuctionID, CurrentPrice: bidgate.FromCents(u.PriceCents), LeaderID: u.LeaderID,
		LeaderAlias: u.LeaderAlias, EndTime: time.UnixMicro(u.EndUs), Status: u.Status, BidCount: u.Seq}
	s := bidgate.NewStateUpdate(a)
	if u.UpdatedUs > 0 {
		s.UpdatedAt = time.UnixMicro(u.UpdatedUs).UTC().Format(time.RFC3339Nano)
	}
	return s
}

// Publish sends state updates, in one round trip. Viewers may miss one (the
// next carries a higher seq), so callers count a failure rather than fail.
func (s *Store) Publish(ctx context.Context, updates ...Update) error {
	if len(updates) == 1 {
		u := updates[0]
		return s.rdb.SPublish(ctx, Channel(u.AuctionID), u.encode()).Err()
	}
	pipe := s.rdb.Pipeline()
	for _, u := range updates {
		pipe.SPublish(ctx, Channel(u.AuctionID), u.encode())
	}
	_, err := pipe.Exec(ctx)
	return err
}
