package settings

import (
	"fmt"
	"io"
	"log/slog"
	"os"
)

// Log is how a command logs to standard error.
type Log struct {
	Level  string // debug, info, warn or error
	Format string // text or json
}

// DefaultLog is the one statement of the logging defaults.
func DefaultLog() Log { return Log{Level: "info", Format: "text"} }

// Register adds --log-level and --log-format, and their check.
func (l *Log) Register(fs *FlagSet) {
	d := DefaultLog()
	fs.StringVar(&l.Level, "log-level", d.Level, "log level: debug, info, warn, error")
	fs.StringVar(&l.Format, "log-format", d.Format, "log format: text or json")
	fs.Check(func() error { _, err := l.handler(io.Discard); return err }, nil)
}

// Logger returns the logger l describes, writing to standard error.
func (l Log) Logger() (*slog.Logger, error) {
	h, err := l.handler(os.Stderr)
	if err != nil {
		return nil, err
	}
	return slog.New(h), nil
}

func (l Log) handler(w io.Writer) (slog.Handler, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(l.Level)); err != nil {
		return nil, fmt.Errorf("--log-level: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch l.Format {
	case "text":
		return slog.NewTextHandler(w, opts), nil
	case "json":
		return slog.NewJSONHandler(w, opts), nil
	}
	return nil, fmt.Errorf("--log-format must be text or json, got %q", l.Format)
}
