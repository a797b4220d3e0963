// Package testport hands out free loopback ports for servers that tests
// start as other processes, below the kernel's ephemeral range.
//
// A port taken from ":0" is an ephemeral one: between the test closing its
// probe and the server binding it, any outgoing connection on the machine
// may take it as its source port, and the server then fails with "address
// already in use"; so may a killed server that restarts on it. Ports below
// the range are only ever taken by a bind.
package testport

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// low is the first port handed out: above the fixed ports the Redis Cluster
// harnesses use (71xx-76xx and their bus ports, 17xxx).
const low = 20000

var (
	mu   sync.Mutex
	used = map[int]bool{} // handed out by this process: never twice
)

// Next returns a port below the ephemeral range that is free for TCP and UDP
// on 127.0.0.1 (memberlist gossips over both) and that this process has not
// handed out before.
func Next() (int, error) { return take(0) }

// Base returns a port p such that p+o is free, and not handed out before,
// for every offset o: a server that lays its ports out from one base
// (bidgate dev: the API at base, the internal endpoint at base+100, ...).
func Base(tb testing.TB, offsets ...int) int {
	tb.Helper()
	base, err := take(offsets...)
	if err != nil {
		tb.Fatal(err)
	}
	return base
}

// take finds a base whose every offset is free and not handed out, and
// hands them out.
func take(offsets ...int) (int, error) {
	high := ephemeralStart()
	top := 0
	for _, o := range offsets {
		top = max(top, o)
	}
	if high-top-low < 2000 {
		return 0, fmt.Errorf("the ephemeral port range starts at %d: too little room below it for test ports (offsets up to %d)", high, top)
	}
	mu.Lock()
	defer mu.Unlock()
	for range 200 {
		base := low + rand.IntN(high-top-low)
		free, err := allFree(base, offsets)
		if err != nil {
			return 0, err
		}
		if free {
			for _, o := range offsets {
				used[base+o] = true
			}
			return base, nil
		}
	}
	return 0, fmt.Errorf("no free loopback port found in %d-%d (offsets %v)", low, high-top-1, offsets)
}

// allFree reports whether base+o is unused and free for every offset o;
// mu is held.
func allFree(base int, offsets []int) (bool, error) {
	for _, o := range offsets {
		if used[base+o] {
			return false, nil
		}
		if free, err := probe(base + o); err != nil || !free {
			return false, err
		}
	}
	return true, nil
}

// Free is Next for a test: it fails tb when there is no port to give.
func Free(tb testing.TB) int {
	tb.Helper()
	port, err := Next()
	if err != nil {
		tb.Fatal(err)
	}
	return port
}

// Addr is a free port's 127.0.0.1 address.
func Addr(tb testing.TB) string {
	tb.Helper()
	return Loopback(Free(tb))
}

// Loopback is port's address on 127.0.0.1.
func Loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }

// probe binds port for TCP and UDP and releases it.
func probe(port int) (bool, error) {
	addr := Loopback(port)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return false, nil
	}
	pc, err := net.ListenPacket("udp", addr)
	if err != nil {
		ln.Close()
		return false, nil
	}
	if err := pc.Close(); err != nil {
		ln.Close()
		return false, fmt.Errorf("release udp %s: %w", addr, err)
	}
	if err := ln.Close(); err != nil {
		return false, fmt.Errorf("release tcp %s: %w", addr, err)
	}
	return true, nil
}

// ephemeralStart is the first port of the kernel's ephemeral range (Linux's
// default when it cannot be read).
func ephemeralStart() int {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 32768
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 32768
	}
	n, err := strconv.Atoi(f[0])
	if err != nil {
		return 32768
	}
	return n
}
