package gateway

import (
	"context"
	"errors"

	"github.com/valyala/fasthttp"

	"bidgate"
	"bidgate/internal/auth"
)

// Notifications reads and marks users' stored notices (the shard: reads
// on PostgreSQL or its read replica, marks on the primary).
type Notifications interface {
	Notifications(ctx context.Context, q bidgate.NotificationsQuery) (bidgate.NotificationsPage, error)
	MarkNotificationsRead(ctx context.Context, userID int64, upTo string) (int64, error)
}

// noticeScopes are the scopes that let a user read their notices: bidders
// and sellers both get them.
var noticeScopes = []string{auth.ScopeBid, auth.ScopeSell}

// noStore is the Cache-Control of a user's notices: no cache, shared or
// the client's own, keeps them.
const noStore = "private, no-store"

type notificationsPage struct {
	Items      []bidgate.Notice `json:"items"`
	Unread     int64            `json:"unread"`
	NextCursor *string          `json:"nextCursor"`
}

// myNotifications serves GET /me/notifications: the caller's notices,
// newest first, with their unread count.
func (s *Server) myNotifications(ctx *fasthttp.RequestCtx, p auth.Principal) {
	if s.notices == nil {
		s.writeError(ctx, errNoRoute)
		return
	}
	q, err := readQuery(ctx, "after", "before", "limit", "userId")
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	nq := bidgate.NotificationsQuery{}
	if nq.Limit, err = q.limit(); err != nil {
		s.writeError(ctx, err)
		return
	}
	if nq.UserID, err = q.user(p.UserID); err != nil {
		s.writeError(ctx, err)
		return
	}
	if nq.After, err = q.noticeID("after"); err != nil {
		s.writeError(ctx, err)
		return
	}
	if nq.Before, err = q.noticeID("before"); err != nil {
		s.writeError(ctx, err)
		return
	}
	// Paging back from a notice and forward from another is no page: a
	// client that pages forward from after continues with before only.
	if nq.After != "" && nq.Before != "" {
		s.writeError(ctx, bidgate.InvalidInput("invalid_query", "after and before cannot be given together"))
		return
	}
	c, cancel := s.requestContext(ctx)
	defer cancel()
	page, err := s.notices.Notifications(c, nq)
	if errors.Is(err, bidgate.ErrNoticeNotFound) {
		// The same answer whether the id is another user's or nobody's.
		name, id := "after", nq.After
		if id == "" {
			name, id = "before", nq.Before
		}
		err = bidgate.InvalidInput("invalid_query", name+": you have no notice "+quoted(id))
	}
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	out := notificationsPage{Items: make([]bidgate.Notice, 0, len(page.Items)), Unread: page.Unread}
	for _, n := range page.Items {
		n.At = n.At.UTC()
		out.Items = append(out.Items, n)
	}
	if page.Next != "" {
		out.NextCursor = &page.Next
	}
	ctx.Response.Header.Set(fasthttp.HeaderCacheControl, noStore)
	writeJSON(ctx, fasthttp.StatusOK, out)
}

// markReadRequest is the body of POST /me/notifications/read: the newest
// notice read, and the user when authentication is off.
type markReadRequest struct {
	UpTo   string `json:"upTo"`
	UserID *int64 `json:"userId"`
}

type unreadCount struct {
	Unread int64 `json:"unread"`
}

// markNotificationsRead serves POST /me/notifications/read: the caller
// has read their notices up to one of theirs; the mark never moves back.
func (s *Server) markNotificationsRead(ctx *fasthttp.RequestCtx, p auth.Principal) {
	if s.notices == nil {
		s.writeError(ctx, errNoRoute)
		return
	}
	var req markReadRequest
	if err := decodeJSON(ctx, &req); err != nil {
		s.writeError(ctx, err)
		return
	}
	if req.UserID != nil && *req.UserID < 1 {
		s.writeError(ctx, bidgate.InvalidInput("invalid_user_id", "userId must be a positive id"))
		return
	}
	user, err := actingUser(p.UserID, req.UserID, "userId", "invalid_user_id")
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	switch {
	case req.UpTo == "":
		s.writeError(ctx, bidgate.InvalidInput("invalid_notice_id", "upTo, the id of the newest notice read, is required"))
		return
	case !bidgate.ValidNoticeID(req.UpTo):
		s.writeError(ctx, bidgate.InvalidInput("invalid_notice_id", "upTo: not a notice id, got "+quoted(req.UpTo)))
		return
	}
	c, cancel := s.requestContext(ctx)
	defer cancel()
	unread, err := s.notices.MarkNotificationsRead(c, user, req.UpTo)
	if err != nil {
		s.writeError(ctx, err)
		return
	}
	ctx.Response.Header.Set(fasthttp.HeaderCacheControl, noStore)
	writeJSON(ctx, fasthttp.StatusOK, unreadCount{Unread: unread})
}

// noticeID is the notice id of parameter name ("" when not given).
func (q query) noticeID(name string) (string, error) {
	v, ok := q[name]
	if ok && !bidgate.ValidNoticeID(v) {
		return "", bidgate.InvalidInput("invalid_query", name+": not a notice id, got "+quoted(v))
	}
	return v, nil
}
