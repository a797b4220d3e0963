package redisstore

import (
	"fmt"
	"strconv"
	"strings"
)

// StreamID is a Redis stream entry id, "<ms>-<seq>", ordered. The zero
// StreamID is before every entry.
type StreamID struct{ ms, seq uint64 }

// ParseStreamID reads an entry id.
func ParseStreamID(s string) (StreamID, error) {
	ms, seq, ok := strings.Cut(s, "-")
	a, err1 := strconv.ParseUint(ms, 10, 64)
	b, err2 := strconv.ParseUint(seq, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return StreamID{}, fmt.Errorf("bad stream id %q", s)
	}
	return StreamID{a, b}, nil
}

func (id StreamID) String() string {
	b := make([]byte, 0, 32)
	b = append(strconv.AppendUint(b, id.ms, 10), '-')
	return string(strconv.AppendUint(b, id.seq, 10))
}

// Before reports whether id comes before o.
func (id StreamID) Before(o StreamID) bool {
	return id.ms < o.ms || (id.ms == o.ms && id.seq < o.seq)
}

// Next is the smallest id after id.
func (id StreamID) Next() StreamID { return StreamID{id.ms, id.seq + 1} }

// Ms is the id's time part: Redis's clock, in milliseconds, when the entry
// was added.
func (id StreamID) Ms() uint64 { return id.ms }
