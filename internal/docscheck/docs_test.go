package main

import (
	"context"
	"strings"
	"testing"
	"time"
)

// TestDocumentation runs the checks that need no binary and no cluster on
// the repository's own pages, so that make test fails on a renamed path,
// test or metric, a broken link or a README grown past its bound.
func TestDocumentation(t *testing.T) {
	const root = "../.."
	pages, err := readPages(root)
	if err != nil {
		t.Fatal(err)
	}
	r, err := loadRepo(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range append(checkStatic(pages, r), checkRunnable(pages)...) {
		t.Error(p)
	}
	sessions, err := runnableSessions(pages)
	if err != nil {
		t.Fatal(err)
	}
	if len(sessions) == 0 {
		t.Error("no page has a runnable block: make docs-check would check nothing")
	}
}

func TestSessionNamesTheFailedBlock(t *testing.T) {
	p := newPage("p.md", strings.Join([]string{
		"```sh runnable",
		"A=42",
		"```",
		"```sh",
		"exit 1 # shown only",
		"```",
		"```sh runnable",
		`test "$A" = 42`,
		"```",
		"```sh runnable",
		"false",
		"echo never",
		"```",
	}, "\n"))
	sessions, err := runnableSessions([]page{p})
	if err != nil {
		t.Fatal(err)
	}
	if len(sessions) != 1 || len(sessions[0].Blocks) != 3 {
		t.Fatalf("sessions = %+v, want one of 3 blocks", sessions)
	}
	err = sessions[0].run(context.Background(), time.Minute)
	if err == nil || !strings.Contains(err.Error(), "p.md:10 (runnable block 3 of 3)") {
		t.Errorf("run() = %v, want the failure of p.md:10 (runnable block 3 of 3)", err)
	}

	sessions[0].Blocks = sessions[0].Blocks[:2]
	if err := sessions[0].run(context.Background(), time.Minute); err != nil {
		t.Errorf("run() of the passing blocks = %v", err)
	}
}

// TestStaticChecksFindDrift: what moved or never was is named, what is
// there passes.
func TestStaticChecksFindDrift(t *testing.T) {
	r, err := loadRepo("../..")
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		line string
		bad  bool
	}{
		{"`internal/auth/` holds the tokens", false},
		{"`auth/` holds the tokens", true},
		{"`persist/pgtest/` gives tests databases", true},
		{"`k8s/base/` from deploy/", false},
		{"`bench-results/chaos-1.txt` is written by a run", false},
		{"`application/problem+json` is no path", false},
		{"`TestProxyWorkedExample` in gateway", false},
		{"`shard TestNoSuchTest`", true},
		{"`bidgate_bids_total{outcome}`", false},
		{"`bidgate_bid_duration_seconds_bucket`", false},
		{"`bidgate_no_such_metric`", true},
		{"[api](../docs/api.md#auction-rules)", false},
		{"[api](../docs/api.md#no-such-heading)", true},
		{"[gone](../docs/gone.md)", true},
	}
	for _, tt := range tests {
		problems := checkStatic([]page{newPage("deploy/x.md", tt.line+"\n")}, r)
		if got := len(problems) > 0; got != tt.bad {
			t.Errorf("%s: problems %q, want any: %v", tt.line, problems, tt.bad)
		}
	}
}
