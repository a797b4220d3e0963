package bidgate

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// NoticeType is what a notice tells its user.
type NoticeType string

// The notices bidgate sends: to a bidder who lost the lead, to the winner
// and every other bidder at the close, and to the seller at the close.
const (
	NoticeOutbid NoticeType = "outbid"
	NoticeWon    NoticeType = "won"
	NoticeLost   NoticeType = "lost"
	NoticeSold   NoticeType = "sold"
	NoticeUnsold NoticeType = "unsold"
)

// NoticeTypes lists every NoticeType.
var NoticeTypes = []NoticeType{NoticeOutbid, NoticeWon, NoticeLost, NoticeSold, NoticeUnsold}

// Notice is one message to one user, the payload of a bid-notifications
// message. Its ID is derived from its cause (NoticeID), so every copy of a
// cause delivered again, by any path, carries the same ID.
type Notice struct {
	ID        string     `json:"id"`
	Type      NoticeType `json:"type"`
	UserID    int64      `json:"userId"`
	AuctionID int64      `json:"auctionId"`
	Title     string     `json:"title"`
	// Price is the auction's price after the cause: the price that took
	// the lead from the user, or the final price.
	Price string `json:"price"`
	// MaxAmount is the user's own proxy maximum, where they had one
	// (outbid, won, lost); nobody else's maximum is ever in a notice.
	MaxAmount string `json:"maxAmount,omitempty"`
	// At is the time of the cause by the store that serialized the auction.
	At time.Time `json:"at"`
}

// NoticeID is the ID of the notice of type t to user about auction, caused
// by its bid seq (outbid) or by its close (seq 0). A lead is lost once per
// seq and an auction closes once, so the cause names the notice.
func NoticeID(t NoticeType, auction, user, seq int64) string {
	switch t {
	case NoticeOutbid:
		return fmt.Sprintf("outbid-%d-%d", auction, seq)
	case NoticeLost:
		return fmt.Sprintf("lost-%d-%d", auction, user)
	}
	return string(t) + "-" + strconv.FormatInt(auction, 10)
}

var noticeIDPattern = regexp.MustCompile(`^(outbid-[1-9][0-9]{0,18}-[1-9][0-9]{0,18}|lost-[1-9][0-9]{0,18}-[1-9][0-9]{0,18}|(won|sold|unsold)-[1-9][0-9]{0,18})$`)

// ValidNoticeID reports whether id is shaped like a NoticeID.
func ValidNoticeID(id string) bool { return noticeIDPattern.MatchString(id) }

// Validate checks a notice read from outside (a Kafka message).
func (n Notice) Validate() error {
	switch {
	case !ValidNoticeID(n.ID):
		return fmt.Errorf("notice: bad id %q", n.ID)
	case n.UserID <= 0 || n.AuctionID <= 0:
		return fmt.Errorf("notice %s: bad user or auction id", n.ID)
	case n.At.IsZero():
		return fmt.Errorf("notice %s: no time", n.ID)
	}
	valid := false
	for _, t := range NoticeTypes {
		valid = valid || n.Type == t
	}
	if !valid {
		return fmt.Errorf("notice %s: unknown type %q", n.ID, n.Type)
	}
	if !strings.HasPrefix(n.ID, string(n.Type)+"-") {
		return fmt.Errorf("notice %s: id of another type than %s", n.ID, n.Type)
	}
	if _, err := ParseMoney(n.Price); err != nil {
		return fmt.Errorf("notice %s: price: %w", n.ID, err)
	}
	if n.MaxAmount != "" {
		if _, err := ParseMoney(n.MaxAmount); err != nil {
			return fmt.Errorf("notice %s: maxAmount: %w", n.ID, err)
		}
	}
	return nil
}
