//go:build chaos

package chaos

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
)

// ports hands out free loopback ports below the kernel's ephemeral range.
// A port taken from ":0" is an ephemeral one, and while a killed server is
// down any outgoing connection on the machine may take it as its source
// port; the server could then not restart on it. Ports below the range are
// only ever taken by a bind.
type ports struct {
	low, high int // exclusive high
	used      map[int]bool
}

func newPorts() (*ports, error) {
	high := 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil {
				high = n
			}
		}
	}
	low := 20000
	if high-low < 2000 {
		return nil, fmt.Errorf("the ephemeral port range starts at %d: too little room below it for the harness's ports", high)
	}
	return &ports{low: low, high: high, used: map[int]bool{}}, nil
}

// next returns a port free for TCP and UDP on 127.0.0.1 (memberlist uses
// both).
func (p *ports) next() (int, error) {
	for range 200 {
		port := p.low + rand.IntN(p.high-p.low)
		if p.used[port] {
			continue
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		pc, err := net.ListenPacket("udp", addr)
		if err != nil {
			ln.Close()
			continue
		}
		if err := pc.Close(); err != nil {
			ln.Close()
			return 0, fmt.Errorf("release udp %s: %w", addr, err)
		}
		if err := ln.Close(); err != nil {
			return 0, fmt.Errorf("release tcp %s: %w", addr, err)
		}
		p.used[port] = true
		return port, nil
	}
	return 0, fmt.Errorf("no free loopback port found in %d-%d", p.low, p.high-1)
}

func loopback(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
