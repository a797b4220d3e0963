package ring

import (
	"bytes"
	"context"
	"log"
	"log/slog"
)

// newMemberlistLogger routes memberlist's log lines ("[LEVEL] memberlist:
// message") to slog at debug level, with memberlist's own level kept as an
// attribute. memberlist is chatty about normal gossip (and loud about
// packets from a node with another key or label), so its lines are for
// debugging; the ring logs every membership change itself, at info.
func newMemberlistLogger(l *slog.Logger) *log.Logger {
	return log.New(logWriter{l}, "", 0)
}

type logWriter struct{ log *slog.Logger }

func (w logWriter) Write(p []byte) (int, error) {
	if !w.log.Enabled(context.Background(), slog.LevelDebug) {
		return len(p), nil
	}
	level, msg := splitLevel(bytes.TrimRight(p, "\r\n"))
	w.log.Debug(msg, "component", "memberlist", "memberlist_level", level)
	return len(p), nil
}

// splitLevel splits "[WARN] memberlist: text" into "WARN" and "text".
func splitLevel(line []byte) (level, msg string) {
	if len(line) > 0 && line[0] == '[' {
		if end := bytes.IndexByte(line, ']'); end > 0 {
			level = string(line[1:end])
			line = bytes.TrimLeft(line[end+1:], " ")
		}
	}
	line = bytes.TrimPrefix(line, []byte("memberlist: "))
	return level, string(line)
}
