package gateway

import (
	"strings"
	"testing"
	"time"
)

// A zero field takes its default and a set one is kept.
func TestWithDefaults(t *testing.T) {
	if got, want := (Config{}).withDefaults(), DefaultConfig(); got.MaxBodyBytes != want.MaxBodyBytes ||
		got.RequestTimeout != want.RequestTimeout || got.ReadTimeout != want.ReadTimeout ||
		got.WriteTimeout != want.WriteTimeout || got.IdleTimeout != want.IdleTimeout ||
		got.MaxConns != want.MaxConns || got.MaxConnsPerIP != want.MaxConnsPerIP ||
		got.AuthFailureRate != want.AuthFailureRate || got.AuthFailureBurst != want.AuthFailureBurst ||
		got.ForwardTimeout != want.ForwardTimeout {
		t.Fatalf("zero Config with defaults = %+v, want DefaultConfig %+v", got, want)
	}
	set := Config{MaxBodyBytes: 1, RequestTimeout: time.Millisecond, MaxConns: 3, AuthFailureRate: 0.5}
	got := set.withDefaults()
	if got.MaxBodyBytes != 1 || got.RequestTimeout != time.Millisecond || got.MaxConns != 3 || got.AuthFailureRate != 0.5 {
		t.Fatalf("set fields changed: %+v", got)
	}
	if got.ReadTimeout != DefaultConfig().ReadTimeout {
		t.Fatalf("ReadTimeout %v, want the default %v", got.ReadTimeout, DefaultConfig().ReadTimeout)
	}
}

func TestValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  Config
		want string // in the error; "" for none
	}{
		{"zero", Config{}, ""},
		{"defaults", DefaultConfig(), ""},
		{"negative body size", Config{MaxBodyBytes: -1}, "MaxBodyBytes"},
		{"negative request timeout", Config{RequestTimeout: -time.Second}, "RequestTimeout"},
		{"negative forward timeout", Config{ForwardTimeout: -time.Second}, "ForwardTimeout"},
		{"negative connections", Config{MaxConns: -1}, "MaxConns"},
		{"negative failure rate", Config{AuthFailureRate: -1}, "AuthFailureRate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.Validate()
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("Validate: %v, want none", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("Validate: %v, want an error naming %s", err, tc.want)
			}
		})
	}
}
