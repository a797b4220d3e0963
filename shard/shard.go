// Package shard is the serialization point of each auction: it decides every
// bid, on the cold path in one PostgreSQL statement.
package shard

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"bidgate"
	"bidgate/persist"
)

// Service places bids and serves auctions.
type Service struct {
	store persist.Store
	cold  cold
}

// New returns a Service on db.
func New(db *pgxpool.Pool) *Service {
	return &Service{store: persist.Store{DB: db}, cold: cold{db: db}}
}

// CreateAuction validates and stores a new auction.
func (s *Service) CreateAuction(ctx context.Context, n bidgate.NewAuction) (bidgate.Auction, error) {
	if err := n.Validate(); err != nil {
		return bidgate.Auction{}, err
	}
	a, err := s.store.CreateAuction(ctx, n)
	return a, classify(err)
}

// Auction returns an auction's current state.
func (s *Service) Auction(ctx context.Context, id int64) (bidgate.Auction, error) {
	a, err := s.store.Auction(ctx, id)
	return a, classify(err)
}

// PlaceBid decides one bid. It returns a BidResult (new or replayed) or one of
// bidgate's errors: ErrAuctionNotFound, ErrAuctionClosed, a *BidTooLowError,
// ErrIdempotencyKeyReused, an *InputError; anything else is the store failing.
func (s *Service) PlaceBid(ctx context.Context, r bidgate.BidRequest) (bidgate.BidResult, error) {
	if err := r.Validate(); err != nil {
		return bidgate.BidResult{}, err
	}
	res, err := s.cold.placeBid(ctx, r)
	if errors.Is(err, errNotCold) {
		return bidgate.BidResult{}, fmt.Errorf("auction %d is hot and this node has no hot path: %w", r.AuctionID, bidgate.ErrUnavailable)
	}
	return res, classify(err)
}

// classify marks store outages as bidgate.ErrUnavailable so that callers can
// tell "try again later" from a refusal.
func classify(err error) error {
	if err != nil && persist.IsUnavailable(err) {
		return fmt.Errorf("%w: %w", bidgate.ErrUnavailable, err)
	}
	return err
}
