package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strings"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// Target is one bidgate node: the base URL as given and the loopback
// address it resolved to (the connection goes there, so a name cannot
// resolve elsewhere later).
type Target struct {
	Base string // http://host:port, no trailing slash
	Addr string // ip:port, loopback
}

// ParseTargets parses a comma-separated list of node base URLs. Only plain
// http on loopback (127.0.0.0/8 or ::1) is allowed: the harness is a load
// generator and refuses to aim anywhere else.
func ParseTargets(ctx context.Context, list string) ([]Target, error) {
	var out []Target
	for _, s := range strings.Split(list, ",") {
		s = strings.TrimSpace(s)
		if s == "" {
			continue
		}
		u, addr, err := parseLoopbackURL(ctx, s)
		if err != nil {
			return nil, fmt.Errorf("target %q: %w (want a base URL such as http://127.0.0.1:8080)", s, err)
		}
		if u.Path != "" && u.Path != "/" {
			return nil, fmt.Errorf("target %q: give only scheme, host and port", s)
		}
		out = append(out, Target{Base: "http://" + u.Host, Addr: addr})
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("no targets: give --targets http://127.0.0.1:8080[,...]")
	}
	return out, nil
}

// parseLoopbackURL reads a plain http URL with no user, query or fragment
// whose host is on loopback, and returns it with its resolved ip:port.
func parseLoopbackURL(ctx context.Context, s string) (*url.URL, string, error) {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return nil, "", errors.New("not a URL")
	}
	if u.Scheme != "http" {
		return nil, "", errors.New("only http:// is supported")
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, "", errors.New("give only scheme, host, port and path")
	}
	port := u.Port()
	if port == "" {
		port = "80"
	}
	ip, err := loopbackIP(ctx, u.Hostname())
	if err != nil {
		return nil, "", err
	}
	return u, net.JoinHostPort(ip.String(), port), nil
}

// CheckLoopback refuses a host:port (Redis) that is not on loopback.
func CheckLoopback(ctx context.Context, what, hostport string) error {
	host, _, err := net.SplitHostPort(hostport)
	if err != nil {
		return fmt.Errorf("%s %q: want host:port", what, hostport)
	}
	if _, err := loopbackIP(ctx, host); err != nil {
		return fmt.Errorf("%s %q: %w", what, hostport, err)
	}
	return nil
}

// CheckPostgresLoopback refuses a PostgreSQL URL whose host (and fallback
// hosts) are neither loopback nor a Unix socket: the harness writes
// straight into the database it is given.
func CheckPostgresLoopback(ctx context.Context, dbURL string) error {
	cfg, err := pgxpool.ParseConfig(dbURL)
	if err != nil {
		return fmt.Errorf("--postgres-url: %w", err)
	}
	hosts := []string{cfg.ConnConfig.Host}
	for _, f := range cfg.ConnConfig.Fallbacks {
		hosts = append(hosts, f.Host)
	}
	for _, h := range hosts {
		if strings.HasPrefix(h, "/") {
			continue // Unix socket: local by construction
		}
		if _, err := loopbackIP(ctx, h); err != nil {
			return fmt.Errorf("--postgres-url host %q: %w", h, err)
		}
	}
	return nil
}

// loopbackIP resolves host and returns its first address, provided every
// address it resolves to is a loopback one.
func loopbackIP(ctx context.Context, host string) (netip.Addr, error) {
	if ip, err := netip.ParseAddr(host); err == nil {
		if !ip.Unmap().IsLoopback() {
			return netip.Addr{}, fmt.Errorf("%s is not a loopback address: bidbench only talks to 127.0.0.0/8 or ::1", ip)
		}
		return ip.Unmap(), nil
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	ips, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
	if err != nil {
		return netip.Addr{}, fmt.Errorf("resolve %s: %w", host, err)
	}
	if len(ips) == 0 {
		return netip.Addr{}, fmt.Errorf("%s resolves to no address", host)
	}
	for _, ip := range ips {
		if !ip.Unmap().IsLoopback() {
			return netip.Addr{}, fmt.Errorf("%s resolves to %s, which is not a loopback address: bidbench only talks to 127.0.0.0/8 or ::1", host, ip)
		}
	}
	// Prefer IPv4: that is where a server listening on 127.0.0.1 is.
	for _, ip := range ips {
		if ip.Unmap().Is4() {
			return ip.Unmap(), nil
		}
	}
	return ips[0].Unmap(), nil
}
