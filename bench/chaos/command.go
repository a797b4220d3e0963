//go:build chaos

package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// runOnce runs a command to completion (initdb, pg_ctl, bidgate migrate,
// go build), appending its output to logPath, and returns an error that
// carries the end of that output when it fails.
func runOnce(ctx context.Context, logPath string, cred *syscall.Credential, dir string, env []string, name string, args ...string) (err error) {
	f, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("open %s: %w", logPath, err)
	}
	defer func() {
		if cerr := f.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("close %s: %w", logPath, cerr)
		}
	}()
	if _, err := fmt.Fprintf(f, "\n=== chaos %s: run %s %s\n", time.Now().Format("15:04:05.000"), name, strings.Join(args, " ")); err != nil {
		return fmt.Errorf("write %s: %w", logPath, err)
	}
	cmd := exec.CommandContext(ctx, name, args...)
	var out tailBuffer
	cmd.Stdout = &teeWriter{f, &out}
	cmd.Stderr = cmd.Stdout
	cmd.Dir, cmd.Env = dir, env
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: cred}
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out.String())
	}
	return nil
}

// tailBuffer keeps the last 4 KiB written to it.
type tailBuffer struct{ b []byte }

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if over := len(t.b) - 4096; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string { return string(t.b) }

// teeWriter writes to a file and a tail buffer.
type teeWriter struct {
	f *os.File
	t *tailBuffer
}

func (w *teeWriter) Write(p []byte) (int, error) {
	if _, err := w.t.Write(p); err != nil {
		return 0, err
	}
	return w.f.Write(p)
}

// childEnv is the harness's environment without any BIDGATE_ variable (the
// Makefile exports BIDGATE_POSTGRES_URL, pointing at the machine's own
// PostgreSQL), plus extra.
func childEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "BIDGATE_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}
