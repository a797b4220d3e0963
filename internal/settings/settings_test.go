package settings

import (
	"errors"
	"flag"
	"io"
	"os"
	"strings"
	"testing"

	"bidgate/persist/kafka"
	"bidgate/persist/pgstore"
	"bidgate/persist/redisstore"
)

// A flag is read from the command line, else from BIDGATE_<FLAG_NAME>,
// else it keeps its default; the checks see the result.
func TestFlagSetReadsTheEnvironment(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		args    []string
		want    string
		wantErr string // a part of the error; empty: none
	}{
		{name: "default", want: "fallback"},
		{name: "environment", env: map[string]string{"BIDGATE_SOME_NAME": "from-env"}, want: "from-env"},
		{name: "empty environment value", env: map[string]string{"BIDGATE_SOME_NAME": ""}, want: ""},
		{name: "flag wins", env: map[string]string{"BIDGATE_SOME_NAME": "from-env"}, args: []string{"--some-name", "from-flag"}, want: "from-flag"},
		{name: "bad environment value", env: map[string]string{"BIDGATE_COUNT": "many"}, wantErr: `BIDGATE_COUNT="many"`},
		{name: "check sees the environment", env: map[string]string{"BIDGATE_SOME_NAME": "refused"}, wantErr: "refused"},
		{name: "stray argument", args: []string{"extra"}, wantErr: "unexpected arguments"},
		{name: "unknown variables are not flags", env: map[string]string{"BIDGATE_OTHER": "x"}, want: "fallback"},
	}
	clearEnvironment(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			var name string
			var count int
			fs := NewFlagSet("bidgate test")
			fs.StringVar(&name, "some-name", "fallback", "a setting")
			fs.IntVar(&count, "count", 1, "another")
			fs.Check(func() error {
				if name == "refused" {
					return errors.New("refused")
				}
				return nil
			}, nil)
			err := fs.Parse(c.args)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one about %q", err, c.wantErr)
				}
				return
			}
			if err != nil || name != c.want {
				t.Fatalf("got %q, %v; want %q", name, err, c.want)
			}
		})
	}
}

// clearEnvironment unsets every BIDGATE_ variable until t ends (the
// Makefile exports BIDGATE_POSTGRES_URL), so that the flags keep their
// defaults.
func clearEnvironment(t *testing.T) {
	t.Helper()
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(name, EnvPrefix) {
			t.Setenv(name, "") // restores the value when t ends
			if err := os.Unsetenv(name); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// The usage message lists the flags and says that the environment sets
// them too.
func TestUsageMentionsTheEnvironment(t *testing.T) {
	var out strings.Builder
	fs := NewFlagSet("bidgate test")
	fs.SetOutput(&out)
	fs.String("some-name", "", "a setting")
	if err := fs.Parse([]string{"-h"}); !errors.Is(err, flag.ErrHelp) {
		t.Fatalf("-h: %v", err)
	}
	for _, want := range []string{"usage: bidgate test [flags]", "BIDGATE_<FLAG_NAME>", "-some-name"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("usage %q lacks %q", out.String(), want)
		}
	}
}

// A package's Validate names its fields; the check names the flags that
// set them instead.
func TestCheckNamesTheFlags(t *testing.T) {
	cases := []struct {
		name   string
		err    error
		fields map[string]string
		want   string
	}{
		{"one field", errors.New("pgstore: MaxConns must be from 1 to 1000, got 0"), map[string]string{"MaxConns": "postgres-conns"},
			"pgstore: --postgres-conns must be from 1 to 1000, got 0"},
		{"a field that ends another", errors.New("fanout: PingInterval must be positive\nInterval must be positive"),
			map[string]string{"Interval": "ws-interval", "PingInterval": "ws-ping"}, "fanout: --ws-ping must be positive\n--ws-interval must be positive"},
		{"dotted field", errors.New("shard: Replication.Timeout must be positive"),
			map[string]string{"Replication.Timeout": "redis-wait-timeout", "Timeout": "other"}, "shard: --redis-wait-timeout must be positive"},
		{"a word inside another is left", errors.New("MaxConnsLimit is not MaxConns"), map[string]string{"MaxConns": "c"}, "MaxConnsLimit is not --c"},
		{"no fields", errors.New("MaxConns"), nil, "MaxConns"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := NewFlagSet("bidgate test")
			fs.Check(func() error { return c.err }, c.fields)
			if err := fs.Parse(nil); err == nil || err.Error() != c.want {
				t.Fatalf("got %v, want %q", err, c.want)
			}
		})
	}
}

// Each group takes its defaults from the package that owns the setting,
// and checks itself with that package's rules.
func TestGroups(t *testing.T) {
	cases := []struct {
		name     string
		register func(fs *FlagSet) func() any // returns what the flags set
		args     []string
		want     any
		wantErr  string
	}{
		{name: "postgres defaults", register: func(fs *FlagSet) func() any {
			var p Postgres
			p.Register(fs)
			return func() any { return p.Config }
		}, want: pgstore.Config{URL: pgstore.DefaultConfig().URL, MaxConns: pgstore.DefaultConfig().MaxConns}},
		{name: "postgres pool out of range", register: func(fs *FlagSet) func() any {
			var p Postgres
			p.Register(fs)
			return func() any { return p.Config }
		}, args: []string{"--postgres-conns", "1001"}, wantErr: "--postgres-conns must be from 1 to 1000"},
		{name: "redis defaults", register: func(fs *FlagSet) func() any {
			var r Redis
			r.Register(fs)
			return func() any { return r.Addrs }
		}, want: strings.Join(redisstore.DefaultConfig().Addrs, ",")},
		{name: "redis CA missing", register: func(fs *FlagSet) func() any {
			var r Redis
			r.Register(fs)
			return func() any { return r }
		}, args: []string{"--redis-tls-ca", "/nonexistent/ca.pem"}, wantErr: "--redis-tls-ca"},
		{name: "kafka defaults", register: func(fs *FlagSet) func() any {
			var k Kafka
			k.Register(fs)
			return func() any { return k.Config }
		}, want: kafka.Config{Partitions: kafka.DefaultConfig().Partitions, Replication: kafka.DefaultConfig().Replication,
			PersisterGroup: kafka.DefaultConfig().PersisterGroup, NotifierGroup: kafka.DefaultConfig().NotifierGroup, EmbeddedPort: kafka.DefaultConfig().EmbeddedPort}},
		{name: "kafka partitions", register: func(fs *FlagSet) func() any {
			var k Kafka
			k.Register(fs)
			return func() any { return k }
		}, args: []string{"--kafka-partitions", "0"}, wantErr: "--kafka-partitions must be from 1 to"},
		{name: "kafka TLS without a cluster", register: func(fs *FlagSet) func() any {
			var k Kafka
			k.Register(fs)
			return func() any { return k }
		}, args: []string{"--kafka-tls"}, wantErr: "are for a Kafka cluster"},
		{name: "broker under its own names", register: func(fs *FlagSet) func() any {
			var b Broker
			b.Register(fs, "port", "partitions")
			return func() any { return b }
		}, args: []string{"--partitions", "3"}, want: Broker{Port: kafka.DefaultConfig().StandalonePort, Partitions: 3}},
		{name: "broker port out of range", register: func(fs *FlagSet) func() any {
			var b Broker
			b.Register(fs, "port", "partitions")
			return func() any { return b }
		}, args: []string{"--port", "70000"}, wantErr: "--port must be a port number"},
		{name: "log format", register: func(fs *FlagSet) func() any {
			var l Log
			l.Register(fs)
			return func() any { return l }
		}, args: []string{"--log-format", "xml"}, wantErr: "--log-format must be text or json"},
		{name: "log level", register: func(fs *FlagSet) func() any {
			var l Log
			l.Register(fs)
			return func() any { return l }
		}, args: []string{"--log-level", "loud"}, wantErr: "--log-level"},
	}
	clearEnvironment(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			fs := NewFlagSet("bidgate test")
			fs.SetOutput(io.Discard)
			got := c.register(fs)
			err := fs.Parse(c.args)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("error %v, want one about %q", err, c.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if g := got(); g != c.want {
				t.Fatalf("got %+v, want %+v", g, c.want)
			}
		})
	}
}
