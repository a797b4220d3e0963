package testredis

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"bidgate/internal/await"
	"bidgate/internal/testport"
)

// Server starts a Redis server of the test's own (nothing on disk) and
// returns a client on it and the server's process id; both end with tb.
// For what a test must not do to the shared one: flush its scripts, stop
// it (SIGSTOP), say.
func Server(tb testing.TB) (*redis.Client, int) {
	tb.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		tb.Fatal("redis-server is not installed")
	}
	port := testport.Free(tb)
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no")
	cmd.Dir = tb.TempDir()
	if err := cmd.Start(); err != nil {
		tb.Fatalf("start redis-server: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	rdb := redis.NewClient(&redis.Options{Addr: testport.Loopback(port)})
	tb.Cleanup(func() {
		if err := rdb.Close(); err != nil {
			tb.Errorf("close the client of the test's redis-server: %v", err)
		}
		if err := cmd.Process.Kill(); err != nil && !errors.Is(err, os.ErrProcessDone) {
			tb.Errorf("stop the test's redis-server: %v", err)
		}
		<-exited
	})
	await.NoError(tb, 10*time.Second, "the test's redis-server to answer", func() error {
		select {
		case err := <-exited:
			exited <- err // for the cleanup
			return fmt.Errorf("redis-server exited: %v", err)
		default:
		}
		return rdb.Ping(context.Background()).Err()
	})
	return rdb, cmd.Process.Pid
}
