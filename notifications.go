package bidgate

// MaxUnread caps the unread count of a user's notices: counting stops
// there, so a count of MaxUnread means "MaxUnread or more" and costs the
// same however far behind the user is.
const MaxUnread = 1000

// NotificationsQuery asks for a page of a user's stored notices, newest
// first: up to Limit (1 to MaxPageSize) of them, only those stored after
// the notice After, or only those stored before the notice Before (a
// notice id of the user's own; "" for none; at most one of the two).
type NotificationsQuery struct {
	UserID int64
	After  string
	Before string
	Limit  int
}

// NotificationsPage is a page of a user's notices, newest first. Unread is
// how many of the user's notices were stored after the one they marked
// read last, at most MaxUnread. Next is the id to ask Before for the next
// page when more notices within the query's bounds follow ("" on the last
// page).
type NotificationsPage struct {
	Items  []Notice
	Unread int64
	Next   string
}
