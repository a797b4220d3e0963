package main

import (
	"reflect"
	"strings"
	"testing"
)

func TestBlocks(t *testing.T) {
	tests := []struct {
		name string
		text string
		want []block
	}{
		{"runnable sh", "intro\n```sh runnable\necho hi\n```\n",
			[]block{{Line: 2, Info: "sh runnable", Text: "echo hi\n", Runnable: true}}},
		{"runnable bash", "```bash runnable\na\nb\n```\n",
			[]block{{Line: 1, Info: "bash runnable", Text: "a\nb\n", Runnable: true}}},
		{"shown only", "```sh\nwebsocat ws://x\n```\n",
			[]block{{Line: 1, Info: "sh", Text: "websocat ws://x\n"}}},
		{"runnable is not the language", "```runnable\nx\n```\n",
			[]block{{Line: 1, Info: "runnable", Text: "x\n"}}},
		{"another language", "```go runnable\nx\n```\n",
			[]block{{Line: 1, Info: "go runnable", Text: "x\n"}}},
		{"longer fence holds a shorter one", "````sh runnable\n```\nx\n````\n",
			[]block{{Line: 1, Info: "sh runnable", Text: "```\nx\n", Runnable: true}}},
		{"code span at a line's start is no fence", "```a``` b\n```sh runnable\nx\n```\n",
			[]block{{Line: 2, Info: "sh runnable", Text: "x\n", Runnable: true}}},
		{"indented four spaces is no fence", "    ```sh runnable\nx\n", nil},
		{"two blocks", "```sh runnable\na\n```\ntext\n```\nb\n```\n",
			[]block{{Line: 1, Info: "sh runnable", Text: "a\n", Runnable: true}, {Line: 5, Text: "b\n"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, _, err := newPage("p.md", tt.text).blocks()
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("blocks() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestUnclosedBlock(t *testing.T) {
	_, _, err := newPage("p.md", "a\n```sh runnable\necho\n").blocks()
	if err == nil || !strings.Contains(err.Error(), "p.md:2") {
		t.Errorf("blocks() error = %v, want one naming p.md:2", err)
	}
}

func TestSpansAndLinks(t *testing.T) {
	p := newPage("docs/p.md", "see `gateway/` and [api](api.md#bid)\n```sh\n`not a span` [no](link.md)\n```\n`--listen` x `b`\n")
	spans, err := p.spans()
	if err != nil {
		t.Fatal(err)
	}
	want := []span{{1, "gateway/"}, {5, "--listen"}, {5, "b"}}
	if !reflect.DeepEqual(spans, want) {
		t.Errorf("spans() = %v, want %v", spans, want)
	}
	links, err := p.links()
	if err != nil {
		t.Fatal(err)
	}
	if want := []span{{1, "api.md#bid"}}; !reflect.DeepEqual(links, want) {
		t.Errorf("links() = %v, want %v", links, want)
	}
}

func TestAnchors(t *testing.T) {
	p := newPage("p.md", "# The API\n## Faults: `make chaos`\n## Bid\n## Bid\n#not a heading\n```\n# comment\n```\n")
	got, err := p.anchors()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"the-api": true, "faults-make-chaos": true, "bid": true, "bid-1": true}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("anchors() = %v, want %v", got, want)
	}
}

func TestFlagTable(t *testing.T) {
	p := newPage("p.md", strings.Join([]string{
		"| flag | default | meaning |",
		"| --- | --- | --- |",
		"| `--listen` | `:8080` | x |",
		"| `--seeds` | | x |",
		"| `--roles` | all | not a span: not stated |",
		"| `--gossip-advertise` | `--gossip-bind` | another flag's value |",
		"| `--a`, `--b` | off | two flags |",
		"",
		"| name | default |",
		"| --- | --- |",
		"| `--other` | `1` |",
	}, "\n"))
	got, err := p.flagTable()
	if err != nil {
		t.Fatal(err)
	}
	want := []flagRow{{Line: 3, Flag: "listen", Default: ":8080"}, {Line: 4, Flag: "seeds"}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("flagTable() = %+v, want %+v", got, want)
	}
}

func TestFlagDefaults(t *testing.T) {
	fl := flags{"listen": {":8080"}, "migrate": {"true"}, "seeds": {""}, "kafka-embedded-port": {"", "9092"}}
	tests := []struct {
		flag, def string
		want      bool
	}{
		{"listen", ":8080", true},
		{"listen", ":9090", false},
		{"migrate", "true", true},
		{"seeds", "", true},
		{"kafka-embedded-port", "0", true},
		{"kafka-embedded-port", "9092", true},
		{"kafka-embedded-port", "1", false},
	}
	for _, tt := range tests {
		if got := fl.has(tt.flag, tt.def); got != tt.want {
			t.Errorf("has(%q, %q) = %v, want %v", tt.flag, tt.def, got, tt.want)
		}
	}
}

func TestUsageParsing(t *testing.T) {
	help := "usage: bidgate serve [flags]\n\n" +
		"  -listen string\n    \tHTTP listen address (default \":8080\")\n" +
		"  -migrate\n    \tapply migrations (default true)\n" +
		"  -seeds string\n    \tgossip addresses; empty starts a new cluster\n" +
		"  -roles value\n    \troles: a,b\n    \tmore usage (default a,b)\n"
	got := map[string]string{}
	for _, f := range usageFlag.FindAllStringSubmatch(help, -1) {
		def := ""
		if m := usageDefault.FindStringSubmatch(strings.TrimSpace(f[2])); m != nil {
			def = strings.Trim(m[1], `"`)
		}
		got[f[1]] = def
	}
	want := map[string]string{"listen": ":8080", "migrate": "true", "seeds": "", "roles": "a,b"}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("flags = %v, want %v", got, want)
	}
	usage := "commands:\n  serve     run a node\n  dev       run a cluster\n               continued\n"
	var commands []string
	for _, m := range usageCommand.FindAllStringSubmatch(usage, -1) {
		commands = append(commands, m[1])
	}
	if want := []string{"serve", "dev"}; !reflect.DeepEqual(commands, want) {
		t.Errorf("commands = %v, want %v", commands, want)
	}
}

func TestNegatedCommandsAreRefused(t *testing.T) {
	p := newPage("p.md", "```sh runnable\necho ok\n! grep -q x <<<\"$A\"\n[[ $A != *x* ]]\n```\n```sh\n! shown only\n```\n")
	got := checkRunnable([]page{p})
	if len(got) != 1 || !strings.HasPrefix(got[0], "p.md:3:") {
		t.Errorf("checkRunnable() = %q, want one problem at p.md:3", got)
	}
}
