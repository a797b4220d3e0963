package main

import (
	"fmt"
	"io"
	"strings"
	"time"

	"bidgate/internal/auth"
	"bidgate/internal/settings"
)

// tokenConfig is `bidgate token`: a token for the dev cluster.
type tokenConfig struct {
	Sub     int64
	Scopes  []string
	TTL     time.Duration
	Signing settings.Signing
}

func parseTokenConfig(args []string) (tokenConfig, error) {
	var c tokenConfig
	var sub, scope string
	fs := settings.NewFlagSet("bidgate token")
	fs.StringVar(&sub, "sub", "", "the user id the token is for (required)")
	fs.StringVar(&scope, "scope", "", "scopes, separated by spaces or commas: bid, sell, operator (required)")
	fs.DurationVar(&c.TTL, "ttl", time.Hour, "how long the token is valid; negative mints one already expired")
	c.Signing.Register(fs, settings.SigningFlags{Key: "key", Issuer: "iss", Audience: "aud"})
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	var err error
	if c.Sub, err = auth.ParseSubject(sub); err != nil {
		return c, fmt.Errorf("--sub: %w", err)
	}
	c.Scopes = strings.FieldsFunc(scope, func(r rune) bool { return r == ',' || r == ' ' })
	if len(c.Scopes) == 0 {
		return c, fmt.Errorf("--scope is required: bid, sell, operator, or several")
	}
	for _, s := range c.Scopes {
		switch s {
		case auth.ScopeBid, auth.ScopeSell, auth.ScopeOperator:
		default:
			return c, fmt.Errorf("--scope: unknown scope %q (bid, sell, operator)", s)
		}
	}
	if c.TTL == 0 {
		return c, fmt.Errorf("--ttl must not be zero")
	}
	return c, nil
}

// printToken writes one line: the token.
func printToken(w io.Writer, c tokenConfig) error {
	key, err := auth.LoadKey(c.Signing.KeyFile)
	if err != nil {
		return fmt.Errorf("%w (make run creates the dev key; run from the checkout's root, or give --key)", err)
	}
	t, err := key.Mint(auth.Token{Subject: c.Sub, Scopes: c.Scopes, Issuer: c.Signing.Issuer, Audience: c.Signing.Audience,
		Expires: time.Now().Add(c.TTL)})
	if err != nil {
		return err
	}
	_, err = fmt.Fprintln(w, t)
	return err
}
