//go:build chaos

package chaos

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is one child process the harness owns. It can be killed, stopped and
// started again any number of times with the same binary; every
// incarnation's output is appended to the same log file, after a header
// line, so that a failure can be read in order.
//
// Each child gets SIGKILL when the harness dies (Pdeathsig), so that a test
// killed by its timeout leaves no server behind on a loopback port.
type proc struct {
	name    string
	path    string
	env     []string
	dir     string
	cred    *syscall.Credential // run as this user (postgres); nil: as the harness
	logPath string
	// onDeath is told of every exit that was not asked for.
	onDeath func(name string, at time.Time, err error)

	mu      sync.Mutex
	args    []string
	done    chan struct{} // closed when the current incarnation has exited
	waitErr error
	ready   chan struct{} // closed when the current incarnation logged its ready line
	expect  bool          // the current incarnation is being stopped on purpose
	cmd     *exec.Cmd
}

// start starts a new incarnation with args. readyLine, when not empty, is a
// piece of the log line that says the process serves; waitReady awaits it.
func (p *proc) start(args []string, readyLine string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.done != nil {
		select {
		case <-p.done:
		default:
			return fmt.Errorf("start %s: it is still running (pid %d)", p.name, p.cmd.Process.Pid)
		}
	}
	f, err := os.OpenFile(p.logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("start %s: open its log: %w", p.name, err)
	}
	if _, err := fmt.Fprintf(f, "\n=== chaos %s: start %s %s\n", time.Now().Format("15:04:05.000"), p.path, strings.Join(args, " ")); err != nil {
		f.Close()
		return fmt.Errorf("start %s: write its log: %w", p.name, err)
	}
	ready := make(chan struct{})
	w := &lineWatch{w: f, want: readyLine, seen: ready}
	if readyLine == "" {
		close(ready)
		w.seen = nil
	}
	cmd := exec.Command(p.path, args...)
	cmd.Stdout, cmd.Stderr = w, w
	cmd.Env, cmd.Dir = p.env, p.dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Credential: p.cred}
	// A killed server's children (Redis's AOF rewrite, PostgreSQL's
	// backends) may hold the log pipe open a little longer; do not wait on
	// them.
	cmd.WaitDelay = 2 * time.Second
	if err := cmd.Start(); err != nil {
		f.Close()
		return fmt.Errorf("start %s: %w", p.name, err)
	}
	done := make(chan struct{})
	p.cmd, p.args, p.done, p.ready, p.expect, p.waitErr = cmd, args, done, ready, false, nil
	go func() {
		err := cmd.Wait()
		at := time.Now()
		fmt.Fprintf(f, "=== chaos %s: %s exited: %v\n", at.Format("15:04:05.000"), p.name, exitText(err))
		f.Close()
		p.mu.Lock()
		p.waitErr = err
		expected := p.expect
		p.mu.Unlock()
		close(done)
		if !expected && p.onDeath != nil {
			p.onDeath(p.name, at, err)
		}
	}()
	return nil
}

// restart starts the process again with the arguments of its last start.
func (p *proc) restart(readyLine string) error {
	p.mu.Lock()
	args := p.args
	p.mu.Unlock()
	return p.start(args, readyLine)
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// waitReady waits until the current incarnation logged its ready line, and
// fails if it exits first.
func (p *proc) waitReady(ctx context.Context) error {
	p.mu.Lock()
	ready, done := p.ready, p.done
	p.mu.Unlock()
	select {
	case <-ready:
		return nil
	case <-done:
		return fmt.Errorf("%s exited before it was ready: %v", p.name, exitText(p.exitErr()))
	case <-ctx.Done():
		return fmt.Errorf("%s not ready: %w", p.name, ctx.Err())
	}
}

// alive reports whether the current incarnation is running.
func (p *proc) alive() bool {
	p.mu.Lock()
	done := p.done
	p.mu.Unlock()
	if done == nil {
		return false
	}
	select {
	case <-done:
		return false
	default:
		return true
	}
}

func (p *proc) exitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.waitErr
}

// exited is closed when the current incarnation has exited.
func (p *proc) exited() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.done
}

// expectExit marks the current incarnation's coming exit as asked for.
func (p *proc) expectExit() {
	p.mu.Lock()
	p.expect = true
	p.mu.Unlock()
}

// signal sends sig to the current incarnation, its exit being asked for,
// and waits until it has exited.
func (p *proc) signal(ctx context.Context, sig syscall.Signal) error {
	p.mu.Lock()
	cmd := p.cmd
	p.expect = true
	p.mu.Unlock()
	if cmd == nil {
		return fmt.Errorf("%s was never started", p.name)
	}
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("send %v to %s: %w", sig, p.name, err)
	}
	return p.waitExit(ctx)
}

// waitExit waits until the current incarnation has exited.
func (p *proc) waitExit(ctx context.Context) error {
	select {
	case <-p.exited():
		return nil
	case <-ctx.Done():
		return fmt.Errorf("wait for %s to exit: %w", p.name, ctx.Err())
	}
}

// kill is kill -9.
func (p *proc) kill(ctx context.Context) error { return p.signal(ctx, syscall.SIGKILL) }

// stop asks the process to stop (SIGTERM) and kills it if it has not
// exited within grace.
func (p *proc) stop(ctx context.Context, grace time.Duration) error {
	if !p.alive() {
		return nil
	}
	gctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	err := p.signal(gctx, syscall.SIGTERM)
	if err == nil || ctx.Err() != nil {
		return err
	}
	return p.kill(ctx)
}

// tail is the last n lines of the log file, each cut at 400 bytes (a
// node's error may list hundreds of failed produces in one line).
func (p *proc) tail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(no log: %v)", err)
	}
	lines := bytes.Split(bytes.TrimRight(b, "\n"), []byte("\n"))
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	for i, l := range lines {
		if len(l) > 400 {
			lines[i] = append(l[:400:400], " ..."...)
		}
	}
	return string(bytes.Join(lines, []byte("\n")))
}

// lineWatch passes a process's output on to its log file and closes seen
// at the first line that contains want.
type lineWatch struct {
	mu      sync.Mutex
	w       io.Writer
	want    string
	seen    chan struct{} // nil once closed
	partial []byte
}

func (l *lineWatch) Write(b []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.seen != nil {
		l.partial = append(l.partial, b...)
		for {
			i := bytes.IndexByte(l.partial, '\n')
			if i < 0 {
				break
			}
			if bytes.Contains(l.partial[:i], []byte(l.want)) {
				close(l.seen)
				l.seen, l.partial = nil, nil
				break
			}
			l.partial = l.partial[i+1:]
		}
	}
	return l.w.Write(b)
}
