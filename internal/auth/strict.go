package auth

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
)

// numericDates are the claims that must be JSON numbers (RFC 7519 §2,
// NumericDate). The JWT library would also take a quoted number.
var numericDates = []string{"exp", "nbf", "iat"}

// checkStrictJSON refuses a token whose header or claims another JSON
// parser might read differently than the JWT library does: a member named
// twice (the library takes the last; another consumer of the same token
// may take the first), invalid UTF-8, anything after the object, and a
// NumericDate claim given as a string. It runs before the signature check,
// so a malformed token costs no signature verification. Its errors name
// what is wrong, never the token's bytes.
func checkStrictJSON(token string) error {
	segments := strings.Split(token, ".")
	if len(segments) != 3 {
		return errors.New("token is not three dot-separated segments")
	}
	for i, part := range []struct {
		name    string
		numbers []string
	}{{"header", nil}, {"claims", numericDates}} {
		b, err := base64.RawURLEncoding.DecodeString(segments[i])
		if err != nil {
			return fmt.Errorf("%s: not base64url without padding", part.name)
		}
		if err := checkObject(b, part.numbers); err != nil {
			return fmt.Errorf("%s: %w", part.name, err)
		}
	}
	return nil
}

// checkObject reads b as exactly one JSON object whose member names are
// unique and whose members named in numbers, if present, are JSON numbers.
func checkObject(b []byte, numbers []string) error {
	d := jsontext.NewDecoder(bytes.NewReader(b)) // duplicate names and invalid UTF-8 are errors by default
	if tok, err := d.ReadToken(); err != nil || tok.Kind() != '{' {
		return errors.New("not a JSON object")
	}
	for d.PeekKind() != '}' {
		name, err := d.ReadToken()
		if err != nil {
			return withoutValues(err)
		}
		if n := name.String(); d.PeekKind() != '0' && containsName(numbers, n) {
			return fmt.Errorf("%q is not a JSON number", n)
		}
		if err := d.SkipValue(); err != nil {
			return withoutValues(err)
		}
	}
	if _, err := d.ReadToken(); err != nil { // the closing brace
		return withoutValues(err)
	}
	if _, err := d.ReadToken(); err != io.EOF {
		return errors.New("data after the JSON object")
	}
	return nil
}

func containsName(names []string, n string) bool {
	for _, m := range names {
		if m == n {
			return true
		}
	}
	return false
}

// withoutValues keeps what kind of syntax error err is (a duplicate name,
// invalid UTF-8, truncated input) and its offset, but not the bytes it
// quotes: an error may be logged, and a token's claims are the caller's.
func withoutValues(err error) error {
	var syn *jsontext.SyntacticError
	if errors.As(err, &syn) {
		return fmt.Errorf("invalid JSON at byte %d: %s", syn.ByteOffset, syntaxKind(syn.Err))
	}
	return errors.New("invalid JSON")
}

// syntaxKind names the few syntax errors a strict reading adds to plain
// JSON validity.
func syntaxKind(err error) string {
	switch {
	case errors.Is(err, jsontext.ErrDuplicateName):
		return "duplicate member name"
	case errors.Is(err, jsontext.ErrNonStringName):
		return "member name is not a string"
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "truncated"
	}
	return "malformed"
}
