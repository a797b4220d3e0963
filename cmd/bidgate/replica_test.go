package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"bidgate/internal/auth"
	"bidgate/internal/await"
	"bidgate/internal/testdb"
	"bidgate/internal/testport"
)

// A node whose read replica does not answer starts all the same and reads
// from the primary, counting every read it sends there; the log names the
// replica by host and port, never by its URL's password.
func TestNodeReadsPastAnUnansweringReplica(t *testing.T) {
	_, dbURL := testdb.New(t, 4)
	keyPath, key := devKey(t)
	const password = "replica-password-of-the-test"
	replica := fmt.Sprintf("postgres://reader:%s@%s/bidgate?sslmode=disable&connect_timeout=1", password, testport.Addr(t))
	// Without the read cache, each GET reads the store.
	args, base := serveArgs(t, dbURL, keyPath, "--postgres-read-url", replica, "--read-cache-size", "0")
	p := startProcess(t, args...)
	down := p.await(t, "read replica does not answer", 60*time.Second)
	if strings.Contains(down, password) {
		t.Fatalf("the log shows the replica's password: %s", down)
	}
	metricsURL := "http://" + logValue(t, p.await(t, "bidgate serving", 60*time.Second), "admin") + "/metrics"

	status, a := call(t, "POST", base+"/auctions", map[string]any{"title": "read past the replica", "startPrice": "10.00",
		"minIncrement": "1.00", "endTime": time.Now().Add(time.Hour).Format(time.RFC3339)}, bearer(t, key, 1, auth.ScopeSell)...)
	if status != http.StatusCreated {
		t.Fatalf("create auction: %d %v", status, a)
	}
	for range 3 {
		if status, got := call(t, "GET", fmt.Sprintf("%s/auctions/%d", base, int64(a["id"].(float64))), nil); status != http.StatusOK {
			t.Fatalf("read with the replica down: %d %v", status, got)
		}
	}
	for name, least := range map[string]float64{
		`bidgate_read_replica_fallbacks_total{reason="down"}`: 3,
		`bidgate_reads_total{source="primary"}`:               3,
	} {
		await.NoError(t, 10*time.Second, name, func() error { return metricAtLeast(metricsURL, name, least) })
	}
}
