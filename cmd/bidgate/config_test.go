package main

import (
	"testing"
	"time"
)

func TestConfigFlagsAndEnvironment(t *testing.T) {
	cases := []struct {
		name    string
		env     map[string]string
		args    []string
		listen  string
		timeout time.Duration
		wantErr bool
	}{
		{name: "defaults", listen: ":8080", timeout: 5 * time.Second},
		{name: "environment", env: map[string]string{"BIDGATE_LISTEN": ":9000", "BIDGATE_REQUEST_TIMEOUT": "2s"}, listen: ":9000", timeout: 2 * time.Second},
		{name: "flag wins over environment", env: map[string]string{"BIDGATE_LISTEN": ":9000"}, args: []string{"--listen", ":9001"}, listen: ":9001", timeout: 5 * time.Second},
		{name: "bad environment value", env: map[string]string{"BIDGATE_REQUEST_TIMEOUT": "soon"}, wantErr: true},
		{name: "pool size out of range", args: []string{"--postgres-conns", "0"}, wantErr: true},
		{name: "stray argument", args: []string{"extra"}, wantErr: true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for k, v := range c.env {
				t.Setenv(k, v)
			}
			cfg, err := parseConfig("serve", c.args)
			if c.wantErr {
				if err == nil {
					t.Fatal("want an error")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if cfg.Listen != c.listen || cfg.RequestTimeout != c.timeout {
				t.Fatalf("listen %q timeout %v, want %q %v", cfg.Listen, cfg.RequestTimeout, c.listen, c.timeout)
			}
		})
	}
}
