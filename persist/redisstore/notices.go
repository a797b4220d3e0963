package redisstore

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

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
