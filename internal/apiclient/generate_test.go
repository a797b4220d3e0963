package apiclient

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// client.gen.go is what the go:generate line of apiclient.go makes of the
// document now: a document changed without regenerating fails here.
func TestGeneratedClientIsCurrent(t *testing.T) {
	src, err := os.ReadFile("apiclient.go")
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^//go:generate (.*)$`).FindSubmatch(src)
	if m == nil {
		t.Fatal("apiclient.go has no go:generate line")
	}
	args := strings.Fields(string(m[1]))
	out := filepath.Join(t.TempDir(), "client.gen.go")
	for i, a := range args {
		if a == "-o" && i+1 < len(args) {
			args[i+1] = out
		}
	}
	cmd := exec.Command(args[0], args[1:]...)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", m[1], err, b)
	}
	want, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile("client.gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("client.gen.go is not what gateway/openapi/public.json generates: run go generate ./internal/apiclient/")
	}
}
