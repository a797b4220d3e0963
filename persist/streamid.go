package persist

import (
	"fmt"
	"strconv"
	"strings"
)

// streamID is a Redis stream entry id, "<ms>-<seq>", ordered.
type streamID struct{ ms, seq uint64 }

// zeroID is before every entry.
var zeroID = streamID{}

func parseStreamID(s string) (streamID, error) {
	ms, seq, ok := strings.Cut(s, "-")
	a, err1 := strconv.ParseUint(ms, 10, 64)
	b, err2 := strconv.ParseUint(seq, 10, 64)
	if !ok || err1 != nil || err2 != nil {
		return streamID{}, fmt.Errorf("bad stream id %q", s)
	}
	return streamID{a, b}, nil
}

func (id streamID) String() string { return fmt.Sprintf("%d-%d", id.ms, id.seq) }

func (id streamID) before(o streamID) bool {
	return id.ms < o.ms || (id.ms == o.ms && id.seq < o.seq)
}
