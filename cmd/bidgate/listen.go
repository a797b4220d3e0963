package main

import (
	"fmt"
	"net"
	"strconv"
)

// endpoints are a node's three listen addresses: the public API, the
// internal endpoint and the admin endpoint.
type endpoints struct {
	public, internal, admin *endpoint
}

// bindEphemeral binds those of the listen addresses whose port is 0, to
// learn their ports; the others are bound when the node starts serving.
func bindEphemeral(h httpConfig) (*endpoints, error) {
	e := &endpoints{}
	var err error
	if e.public, err = bindIfEphemeral(h.Listen); err != nil {
		return nil, err
	}
	if e.internal, err = bindIfEphemeral(h.InternalListen); err != nil {
		e.close()
		return nil, err
	}
	if e.admin, err = bindIfEphemeral(h.AdminListen); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

func (e *endpoints) close() {
	for _, ep := range []*endpoint{e.admin, e.internal, e.public} {
		if ep != nil {
			ep.close()
		}
	}
}

// endpoint is a listen address that is bound only when the node is ready to
// serve on it, unless its port is 0 and it had to be bound to learn it.
type endpoint struct {
	addr string
	port int
	ln   net.Listener
}

func bindIfEphemeral(addr string) (*endpoint, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, fmt.Errorf("listen address %q: %w", addr, err)
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return nil, fmt.Errorf("listen address %q: bad port", addr)
	}
	e := &endpoint{addr: addr, port: port}
	if port == 0 {
		if e.ln, err = net.Listen("tcp", addr); err != nil {
			return nil, fmt.Errorf("listen on %s: %w", addr, err)
		}
		e.port = e.ln.Addr().(*net.TCPAddr).Port
	}
	return e, nil
}

// listen returns the endpoint's listener, binding it now if need be.
func (e *endpoint) listen() (net.Listener, error) {
	if e.ln == nil {
		ln, err := net.Listen("tcp", e.addr)
		if err != nil {
			return nil, fmt.Errorf("listen on %s: %w", e.addr, err)
		}
		e.ln = ln
	}
	return e.ln, nil
}

func (e *endpoint) close() {
	if e.ln != nil {
		e.ln.Close()
	}
}
