package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// session is the runnable blocks of one page, run in order in one shell.
type session struct {
	Page   string
	Blocks []block
}

// runnableSessions returns a session for every page with runnable blocks.
func runnableSessions(pages []page) ([]session, error) {
	var out []session
	for _, p := range pages {
		blocks, _, err := p.blocks()
		if err != nil {
			return nil, err
		}
		s := session{Page: p.Path}
		for _, b := range blocks {
			if b.Runnable {
				s.Blocks = append(s.Blocks, b)
			}
		}
		if len(s.Blocks) > 0 {
			out = append(out, s)
		}
	}
	return out, nil
}

// where names block i of the session for people: the page, its line, its
// number among the page's runnable blocks.
func (s session) where(i int) string {
	return fmt.Sprintf("%s:%d (runnable block %d of %d)", s.Page, s.Blocks[i].Line, i+1, len(s.Blocks))
}

// script is the session as one bash script. Before each block it writes
// the block's number to descriptor 3, so that a failure names its block,
// and prints a header to the output.
func (s session) script() string {
	var b strings.Builder
	b.WriteString("docscheck_block() { printf '%s\\n' \"$1\" >&3; printf '\\n--- %s\\n' \"$2\"; }\n")
	for i, blk := range s.Blocks {
		fmt.Fprintf(&b, "docscheck_block %d '%s'\n", i, s.where(i))
		b.WriteString(blk.Text)
	}
	return b.String()
}

// run runs the session with bash -euo pipefail in the working directory,
// within timeout, and names the block that failed.
func (s session) run(ctx context.Context, timeout time.Duration) error {
	progress, err := os.CreateTemp("", "docscheck-progress-")
	if err != nil {
		return err
	}
	defer os.Remove(progress.Name())
	defer progress.Close()

	limited, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(limited, "bash", "-euo", "pipefail", "-c", s.script(), "docscheck")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.ExtraFiles = []*os.File{progress} // descriptor 3
	// The shell and what it starts form a group, stopped together on a
	// time-out.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = 5 * time.Second
	runErr := cmd.Run()
	if runErr == nil {
		return nil
	}
	switch {
	case ctx.Err() != nil:
		runErr = fmt.Errorf("interrupted: %w", ctx.Err())
	case limited.Err() != nil:
		runErr = fmt.Errorf("%w (not done within %v)", runErr, timeout)
	}
	b, err := os.ReadFile(progress.Name())
	if err != nil {
		return fmt.Errorf("%s: %w", s.Page, runErr)
	}
	started := strings.Fields(string(b))
	if len(started) == 0 {
		return fmt.Errorf("%s, before its first runnable block: %w", s.Page, runErr)
	}
	var i int
	if _, err := fmt.Sscan(started[len(started)-1], &i); err != nil || i < 0 || i >= len(s.Blocks) {
		return fmt.Errorf("%s: %w", s.Page, runErr)
	}
	return fmt.Errorf("%s: %w", s.where(i), runErr)
}
