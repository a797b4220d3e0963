package main

import (
	"flag"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite testdata/serve-flags.txt from the flags of bidgate serve")

// testdata/serve-flags.txt lists the flags of bidgate serve, one a line,
// for what reads them without building the binary: deploy/validate checks
// every BIDGATE_* setting of the deployment files against it (and a built
// binary's serve --help against it).
func TestServeFlagsAreListed(t *testing.T) {
	var c config
	var names []string
	c.flags("serve").VisitAll(func(f *flag.Flag) { names = append(names, f.Name) })
	want := strings.Join(names, "\n") + "\n"
	const path = "testdata/serve-flags.txt"
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s is not the flags of bidgate serve (go test ./cmd/bidgate -run TestServeFlagsAreListed -update rewrites it):\ngot\n%s\nwant\n%s", path, got, want)
	}
}

// maxFuncLines bounds every function of the commands: a command only wires
// packages together, and a longer function is doing a package's work.
const maxFuncLines = 60

// The commands under cmd/ only wire: no function in their sources (tests
// aside) is longer than maxFuncLines, counted from func to its closing
// brace.
func TestCommandsOnlyWire(t *testing.T) {
	files := token.NewFileSet()
	checked := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return err
		}
		f, err := parser.ParseFile(files, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		checked++
		for _, decl := range f.Decls {
			fn, ok := decl.(*ast.FuncDecl)
			if !ok {
				continue
			}
			start, end := files.Position(fn.Pos()), files.Position(fn.End())
			if n := end.Line - start.Line + 1; n > maxFuncLines {
				t.Errorf("%s:%d: %s is %d lines, at most %d in cmd/: move the work into a package, or split it into steps",
					path, start.Line, funcName(fn), n, maxFuncLines)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if checked < 2 {
		t.Fatalf("checked %d files under cmd/: is the test running in cmd/bidgate?", checked)
	}
}

// funcName is fn as its call sites read it: Name, or (T).Name for a method.
func funcName(fn *ast.FuncDecl) string {
	if fn.Recv == nil || len(fn.Recv.List) == 0 {
		return fn.Name.Name
	}
	recv := fn.Recv.List[0].Type
	if star, ok := recv.(*ast.StarExpr); ok {
		recv = star.X
	}
	if id, ok := recv.(*ast.Ident); ok {
		return "(" + id.Name + ")." + fn.Name.Name
	}
	return fn.Name.Name
}
