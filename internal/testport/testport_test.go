package testport

import (
	"net"
	"testing"
)

func TestPortsAreFreeDistinctAndBelowTheEphemeralRange(t *testing.T) {
	high := ephemeralStart()
	seen := map[int]bool{}
	for range 50 {
		port := Free(t)
		if port < low || port >= high {
			t.Fatalf("port %d outside %d-%d", port, low, high-1)
		}
		if seen[port] {
			t.Fatalf("port %d handed out twice", port)
		}
		seen[port] = true
		ln, err := net.Listen("tcp", Loopback(port))
		if err != nil {
			t.Fatalf("port %d is not free: %v", port, err)
		}
		if err := ln.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

func TestATakenPortIsNotHandedOut(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	free, err := probe(ln.Addr().(*net.TCPAddr).Port)
	if err != nil {
		t.Fatal(err)
	}
	if free {
		t.Fatal("probe called a listened port free")
	}
}
