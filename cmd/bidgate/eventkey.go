package main

import (
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"io"

	"bidgate/internal/settings"
	"bidgate/persist/kafka"
)

// eventKeyConfig is `bidgate event-key`: the public key of the
// event-signing key given (--event-signing-key or its environment
// variable), or a new key.
type eventKeyConfig struct {
	Events settings.Events
}

func parseEventKeyConfig(args []string) (eventKeyConfig, error) {
	var c eventKeyConfig
	fs := settings.NewFlagSet("bidgate event-key")
	fs.StringVar(&c.Events.SigningKey, "event-signing-key", "", "the key whose public key to print; empty makes a new key")
	err := fs.Parse(args)
	return c, err
}

// printEventKey writes the public key of c's signing key, one line; with
// none, a new key and its public key as two lines of an environment file
// (the first is a secret).
func printEventKey(w io.Writer, c eventKeyConfig) error {
	fresh := c.Events.SigningKey == ""
	if fresh {
		seed := make([]byte, 32)
		rand.Read(seed)
		c.Events.SigningKey = base64.StdEncoding.EncodeToString(seed)
	}
	s, err := c.Events.Signer()
	if err != nil {
		return err
	}
	pub := kafka.EncodePublicKey(s.Public())
	if !fresh {
		_, err = fmt.Fprintln(w, pub)
		return err
	}
	_, err = fmt.Fprintf(w, "%s=%s\n%s=%s\n", settings.EnvName("event-signing-key"), c.Events.SigningKey,
		settings.EnvName("event-verify-keys"), pub)
	return err
}
