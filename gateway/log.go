package gateway

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"
)

// fasthttpLogInterval is the least time between two lines fasthttp logs.
const fasthttpLogInterval = 10 * time.Second

// fasthttpLogger lets fasthttp log through slog, without what clients sent
// and without flooding: fasthttp's connection errors quote the request's
// bytes (tokens and cookies included), so they are cut off, and lines come
// at most every fasthttpLogInterval, with a count of those left out.
type fasthttpLogger struct {
	log *slog.Logger

	mu         sync.Mutex
	lastLogged time.Time
	notLogged  int // lines left out since lastLogged
}

func newFasthttpLogger(log *slog.Logger) *fasthttpLogger { return &fasthttpLogger{log: log} }

// Printf logs one line of fasthttp's, unless one was logged less than
// fasthttpLogInterval ago.
func (l *fasthttpLogger) Printf(format string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if now := time.Now(); now.Sub(l.lastLogged) >= fasthttpLogInterval {
		l.log.Warn("fasthttp: "+withoutRequestBytes(fmt.Sprintf(format, args...)), "not_logged", l.notLogged)
		l.lastLogged, l.notLogged = now, 0
		return
	}
	l.notLogged++
}

// withoutRequestBytes drops the quoted request bytes fasthttp appends to
// parse errors and bounds the length.
func withoutRequestBytes(msg string) string {
	for _, cut := range []string{"contents:", "buffer size="} {
		if i := strings.Index(strings.ToLower(msg), cut); i >= 0 {
			msg = msg[:i] + "[request bytes not logged]"
		}
	}
	if len(msg) > 300 {
		msg = msg[:300] + "..."
	}
	return strings.ToValidUTF8(msg, "?")
}
