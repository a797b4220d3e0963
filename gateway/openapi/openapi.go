// Package openapi holds bidgate's HTTP contract: the OpenAPI 3.1 documents
// of the public listener and of the admin listener, written by hand as the
// source of truth and served as they are at GET /openapi.json on each, and
// that of the internal listener (bids forwarded between nodes), which is
// not served: it takes only requests signed with the cluster secret. The
// gateway's and the end-to-end tests check every answer they get against
// them (internal/apitest), so an answer the documents do not describe
// fails the test that provoked it.
package openapi

import (
	_ "embed"
	"slices"
)

var (
	//go:embed public.json
	public []byte
	//go:embed admin.json
	admin []byte
	//go:embed internal.json
	internal []byte
)

// Public is the document of the public listener: auctions, bids, buy-now,
// the WebSocket upgrade and the probes.
func Public() []byte { return slices.Clone(public) }

// Admin is the document of the admin listener: /cluster/*, the detailed
// readiness, metrics and the profiler.
func Admin() []byte { return slices.Clone(admin) }

// Internal is the document of the internal listener: a forwarded bid, and
// a batch of them.
func Internal() []byte { return slices.Clone(internal) }
