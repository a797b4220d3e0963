package bench

import (
	"context"
	"strings"
	"testing"
)

func TestParseTargetsLoopbackOnly(t *testing.T) {
	ctx := context.Background()
	got, err := ParseTargets(ctx, "http://127.0.0.1:8080, http://127.0.0.2:8081,http://[::1]:8082/,http://localhost:8083")
	if err != nil {
		t.Fatal(err)
	}
	want := []Target{{"http://127.0.0.1:8080", "127.0.0.1:8080"}, {"http://127.0.0.2:8081", "127.0.0.2:8081"},
		{"http://[::1]:8082", "[::1]:8082"}}
	if len(got) != 4 {
		t.Fatalf("got %v", got)
	}
	for i, w := range want {
		if got[i] != w {
			t.Errorf("target %d = %+v, want %+v", i, got[i], w)
		}
	}
	if !strings.HasSuffix(got[3].Addr, ":8083") || got[3].Base != "http://localhost:8083" {
		t.Errorf("localhost target = %+v", got[3])
	}
	for _, bad := range []string{"http://10.0.0.1:8080", "http://192.168.1.10:8080", "http://8.8.8.8", "http://[2001:db8::1]:80",
		"http://127.0.0.1:8080,http://10.1.2.3:8080", "https://127.0.0.1:8443", "127.0.0.1:8080", "", "http://127.0.0.1:8080/api"} {
		if _, err := ParseTargets(ctx, bad); err == nil {
			t.Errorf("ParseTargets(%q) accepted it", bad)
		} else {
			t.Logf("%q: %v", bad, err)
		}
	}
	if err := CheckLoopback(ctx, "--redis-addrs", "10.0.0.5:6379"); err == nil {
		t.Error("a non-loopback Redis was accepted")
	}
	if err := CheckPostgresLoopback(ctx, "postgres://postgres@db.example.com:5432/x"); err == nil {
		t.Error("a non-loopback PostgreSQL was accepted")
	}
	if err := CheckPostgresLoopback(ctx, "postgres://postgres@127.0.0.1:5432/bidgate?sslmode=disable"); err != nil {
		t.Error(err)
	}
}
