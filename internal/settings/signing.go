package settings

import "bidgate/internal/auth"

// Signing is the private key a command mints bearer tokens with, and the
// issuer and audience it writes in them: by default the dev cluster's, so
// that its nodes accept them.
type Signing struct {
	KeyFile  string // PKCS #8 PEM
	Issuer   string
	Audience string
}

// SigningFlags are the names a command gives Signing's flags.
type SigningFlags struct {
	Key, Issuer, Audience string
}

// Register adds Signing's three flags under names.
func (s *Signing) Register(fs *FlagSet, names SigningFlags) {
	fs.StringVar(&s.KeyFile, names.Key, auth.DevKeyFile, "private key file (PKCS #8 PEM) to sign with: the one the nodes trust (bidgate dev's --dev-key)")
	fs.StringVar(&s.Issuer, names.Issuer, auth.DevIssuer, "issuer (iss) of the tokens")
	fs.StringVar(&s.Audience, names.Audience, auth.DevAudience, "audience (aud) of the tokens")
}
