package settings

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"
)

// clientTLS is the TLS a store connection uses: nil (plaintext) unless on,
// verifying the server against the PEM roots in caFile, or the system's
// when caFile is empty.
func clientTLS(on bool, caFile string) (*tls.Config, error) {
	if !on && caFile == "" {
		return nil, nil
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12}
	if caFile != "" {
		pem, err := os.ReadFile(caFile)
		if err != nil {
			return nil, fmt.Errorf("TLS CA: %w", err)
		}
		c.RootCAs = x509.NewCertPool()
		if !c.RootCAs.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("TLS CA %s: no PEM certificate in it", caFile)
		}
	}
	return c, nil
}
