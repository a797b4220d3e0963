package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"bidgate"
)

// NoticeChannel is the sharded pub/sub channel of user id's notices: every
// node with a /ws/me connection of that user subscribes to it.
func NoticeChannel(user int64) string { return "user:{" + strconv.FormatInt(user, 10) + "}:notices" }

// userOfNoticeChannel is NoticeChannel's inverse.
func userOfNoticeChannel(channel string) (int64, bool) {
	rest, ok := strings.CutPrefix(channel, "user:{")
	if !ok {
		return 0, false
	}
	digits, ok := strings.CutSuffix(rest, "}:notices")
	if !ok {
		return 0, false
	}
	id, err := strconv.ParseInt(digits, 10, 64)
	return id, err == nil && id > 0
}

// PublishNotices sends each notice, as its JSON, on its user's channel, in
// one pipeline. Best effort: a user not connected hears nothing, and one
// connected when Redis fails reads the notice back from the list.
func (s *Store) PublishNotices(ctx context.Context, notices []bidgate.Notice) error {
	if len(notices) == 0 {
		return nil
	}
	pipe := s.rdb.Pipeline()
	for _, n := range notices {
		b, err := json.Marshal(n)
		if err != nil {
			return fmt.Errorf("encode notice %s: %w", n.ID, err)
		}
		pipe.SPublish(ctx, NoticeChannel(n.UserID), b)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("publish %d notices: %w", len(notices), err)
	}
	return nil
}

// ListeningTTL is how long a user counts as listening on /ws/me after a
// node last said so; a node with their connection says so every third of
// it, so a user who left stops counting within ListeningTTL.
const ListeningTTL = 60 * time.Second

// listeningKey marks user id as connected to /ws/me on some node. It shares
// the notice channel's hash tag.
func listeningKey(user int64) string {
	return "user:{" + strconv.FormatInt(user, 10) + "}:listening"
}

// MarkListening records, for ListeningTTL, that users are connected to
// /ws/me (on this node: each node marks its own).
func (s *Store) MarkListening(ctx context.Context, users ...int64) error {
	if len(users) == 0 {
		return nil
	}
	pipe := s.rdb.Pipeline()
	for _, u := range users {
		pipe.Set(ctx, listeningKey(u), 1, ListeningTTL)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("mark %d users listening: %w", len(users), err)
	}
	return nil
}

// Listening says which of users were connected to /ws/me within the last
// ListeningTTL, so that their notices can go first.
func (s *Store) Listening(ctx context.Context, users []int64) (map[int64]bool, error) {
	if len(users) == 0 {
		return nil, nil
	}
	pipe := s.rdb.Pipeline()
	replies := make([]*redis.IntCmd, len(users))
	for i, u := range users {
		replies[i] = pipe.Exists(ctx, listeningKey(u))
	}
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("ask whether %d users listen: %w", len(users), err)
	}
	out := make(map[int64]bool)
	for i, r := range replies {
		if r.Val() > 0 {
			out[users[i]] = true
		}
	}
	return out, nil
}
