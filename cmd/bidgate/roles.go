package main

import (
	"fmt"
	"slices"
	"strings"

	"bidgate/internal/settings"
)

// The roles a process can run; by default it runs them all.
const (
	roleGateway   = "gateway"   // the HTTP API
	roleShard     = "shard"     // deciding bids (cold in PostgreSQL, hot in Redis)
	rolePersister = "persister" // Kafka bid-accepted -> PostgreSQL
	roleCloser    = "closer"    // closing ended auctions, writing the outbox
	roleRelay     = "relay"     // Redis bid logs -> Kafka, outbox -> Kafka
	roleNotifier  = "notifier"  // Kafka bid-notifications -> PostgreSQL and users' channels
)

var allRoles = []string{roleGateway, roleShard, rolePersister, roleCloser, roleRelay, roleNotifier}

// roleSet is the --roles flag.
type roleSet map[string]bool

// register adds --roles, every role by default.
func (r roleSet) register(fs *settings.FlagSet) {
	for _, name := range allRoles {
		r[name] = true
	}
	fs.Var(r, "roles", "comma-separated roles to run: "+strings.Join(allRoles, ","))
}

func (r roleSet) String() string {
	var names []string
	for _, name := range allRoles {
		if r[name] {
			names = append(names, name)
		}
	}
	return strings.Join(names, ",")
}

func (r roleSet) Set(s string) error {
	clear(r)
	for _, name := range strings.Split(s, ",") {
		name = strings.TrimSpace(name)
		if !slices.Contains(allRoles, name) {
			return fmt.Errorf("unknown role %q (roles: %s)", name, strings.Join(allRoles, ", "))
		}
		r[name] = true
	}
	return nil
}

func (r roleSet) needKafka() bool { return r[rolePersister] || r[roleRelay] || r[roleNotifier] }

func (r roleSet) check() error {
	if len(r) == 0 {
		return fmt.Errorf("--roles names no role")
	}
	if r[roleGateway] && !r[roleShard] {
		return fmt.Errorf("--roles: the gateway needs the shard role in the same process")
	}
	return nil
}
