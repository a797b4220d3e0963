package persist

import (
	"context"
	"strings"

	"github.com/segmentio/kafka-go"

	"bidgate"
	"bidgate/persist/pgstore"
	"bidgate/persist/redisstore"
)

// Why a message was refused as a conflict (the reason label of
// bidgate_persister_conflicts_total).
const (
	conflictNoBid      = "no_bid"     // Redis accepted no bid of that seq
	conflictLog        = "log"        // the log's entry of that seq is another bid: the entry is written instead
	conflictRow        = "row"        // PostgreSQL's row of that seq is another bid (the entry is no longer in the log)
	conflictDuplicated = "duplicated" // another message of the batch for the same seq, unverifiable, said otherwise
)

// message is one verified, well-formed bid-accepted message.
type message struct {
	bid bidgate.BidAccepted
	m   kafka.Message
}

// checkAgainstLog decides what of a batch to write. The Redis log is the
// record of a hot auction's bids and a message only a copy of one entry, so
// every message is looked up there by its auction and seq:
//
//   - the log holds the entry: the entry is written (a message that says
//     otherwise, in request id, bidder, amount, maximum or kind, is a
//     conflict: counted, logged, and the entry written instead);
//   - Redis has the auction and accepted no bid of that seq: the message is
//     refused, a conflict;
//   - the entry is gone (trimmed once PostgreSQL held it) or Redis has
//     nothing of the auction (closed and expired, or a Redis that lost its
//     data): the message is the only copy left, and is written as before,
//     except that it never replaces a row: if PostgreSQL holds the seq
//     already, the message is a duplicate (the same bid) or a conflict.
func (p *Persister) checkAgainstLog(ctx context.Context, msgs []message) ([]bidgate.BidAccepted, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	qs := make([]redisstore.LogQuery, len(msgs))
	for i, m := range msgs {
		qs[i] = redisstore.LogQuery{AuctionID: m.bid.AuctionID, Seq: m.bid.Seq, Hint: m.bid.StreamID}
	}
	answers, err := p.rdb.LogEntries(ctx, qs)
	if err != nil {
		p.metrics.errors.WithLabelValues("redis").Inc()
		return nil, err
	}
	out := make([]bidgate.BidAccepted, 0, len(msgs))
	var unchecked []message // no entry to check against
	for i, m := range msgs {
		a := answers[i]
		switch a.Check {
		case redisstore.LogFound:
			if diff := differences(m.bid, a.Entry); diff != "" {
				p.conflict(conflictLog, m, diff)
			}
			out = append(out, a.Entry)
		case redisstore.LogNoBid:
			p.conflict(conflictNoBid, m, "")
		default:
			unchecked = append(unchecked, m)
		}
	}
	return p.checkAgainstRows(ctx, out, unchecked)
}

// checkAgainstRows adds to out the messages whose entries are gone from
// Redis, except those whose seq PostgreSQL or an earlier message of the
// batch holds already.
func (p *Persister) checkAgainstRows(ctx context.Context, out []bidgate.BidAccepted, msgs []message) ([]bidgate.BidAccepted, error) {
	if len(msgs) == 0 {
		return out, nil
	}
	bids := make([]bidgate.BidAccepted, len(msgs))
	for i, m := range msgs {
		bids[i] = m.bid
	}
	rows, err := pgstore.CompareBids(ctx, p.db, bids)
	if err != nil {
		p.metrics.errors.WithLabelValues("postgres").Inc()
		return nil, err
	}
	type seqKey struct{ auction, seq int64 }
	first := map[seqKey]bidgate.BidAccepted{}
	for _, b := range out {
		first[seqKey{b.AuctionID, b.Seq}] = b
	}
	for i, m := range msgs {
		k := seqKey{m.bid.AuctionID, m.bid.Seq}
		switch prior, ok := first[k]; {
		case rows[i] == pgstore.RowSame:
			// Written before: a redelivery.
		case rows[i] == pgstore.RowDifferent:
			p.conflict(conflictRow, m, "")
		case ok && differences(m.bid, prior) != "":
			p.conflict(conflictDuplicated, m, differences(m.bid, prior))
		case !ok:
			first[k] = m.bid
			out = append(out, m.bid)
		}
	}
	return out, nil
}

// differences names the fields in which a message's bid is not the log's
// entry (or another copy), comma-separated; "" when it is the same bid.
// Names only: a log line never shows a hidden maximum.
func differences(got, want bidgate.BidAccepted) string {
	var diff []string
	kind := func(k bidgate.BidKind) bidgate.BidKind {
		if k == "" {
			return bidgate.KindStraight
		}
		return k
	}
	if got.RequestID != want.RequestID {
		diff = append(diff, "requestId")
	}
	if got.BidderID != want.BidderID {
		diff = append(diff, "bidderId")
	}
	if !sameMoney(got.Amount, want.Amount) {
		diff = append(diff, "amount")
	}
	if kind(got.Kind) != kind(want.Kind) {
		diff = append(diff, "kind")
	}
	if got.MaxAmount != want.MaxAmount && !sameMoney(got.MaxAmount, want.MaxAmount) {
		diff = append(diff, "maxAmount")
	}
	if got.Outbid != want.Outbid || got.OutbidMax != want.OutbidMax && !sameMoney(got.OutbidMax, want.OutbidMax) {
		diff = append(diff, "outbid")
	}
	return strings.Join(diff, ",")
}

// sameMoney compares two amounts as money ("1600" is "1600.00").
func sameMoney(a, b string) bool {
	x, errA := bidgate.ParseMoney(a)
	y, errB := bidgate.ParseMoney(b)
	return errA == nil && errB == nil && x.Equal(y)
}

// conflict counts and logs (rate-limited) a message refused because it is
// not the bid the Redis log, or PostgreSQL, holds for its seq.
func (p *Persister) conflict(reason string, m message, diff string) {
	p.metrics.conflicts.WithLabelValues(reason).Inc()
	p.conflictLog.Do(func() {
		p.cfg.Log.Error("refused bid-accepted messages that disagree with the Redis log (logged at most every 10s; see bidgate_persister_conflicts_total)",
			"reason", reason, "auction", m.bid.AuctionID, "seq", m.bid.Seq, "differs", diff,
			"partition", m.m.Partition, "offset", m.m.Offset)
	})
}
