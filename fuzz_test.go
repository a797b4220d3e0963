package bidgate

import (
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/shopspring/decimal"
)

// plainDecimal is ParseMoney's grammar written as a regular expression.
var plainDecimal = regexp.MustCompile(`^(0|[1-9][0-9]{0,14})(\.[0-9]{1,2})?$`)

// FuzzParseMoney: whatever the input, ParseMoney does not panic, accepts
// exactly what plainDecimal matches, with the value decimal.NewFromString
// reads; an amount it accepts survives the trip to cents (Redis) and back
// exactly, and its integer digits are written the one canonical way (no
// leading zero).
func FuzzParseMoney(f *testing.F) {
	for _, s := range []string{"0", "1", "1250000.5", "999999999999.99", "2000.100", "1e3", "-1", "+1", "NaN", " 1", "1.", ".5", "０", "05000", "00.5", "0.50", "00", "999999999999999.99", "1000000000000000", "1.234", "1.-1", "1..2", "", ".", "9.", "12a"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseMoney(s)
		if (err == nil) != plainDecimal.MatchString(s) {
			t.Fatalf("%q: ParseMoney says %v, the grammar says %v", s, err, plainDecimal.MatchString(s))
		}
		if err != nil {
			return
		}
		if want := decimal.RequireFromString(s); !d.Equal(want) || d.Exponent() != want.Exponent() {
			t.Fatalf("%q: parsed as %s (exponent %d), want %s (exponent %d)", s, d, d.Exponent(), want, want.Exponent())
		}
		if back := FromCents(Cents(d)); !back.Equal(d) {
			t.Fatalf("%q: %s -> %d cents -> %s", s, d, Cents(d), back)
		}
		if again, err := ParseMoney(FormatMoney(d)); err != nil || !again.Equal(d) {
			t.Fatalf("%q: formatted %q parses to %s, %v", s, FormatMoney(d), again, err)
		}
		if whole, _, _ := strings.Cut(s, "."); whole != d.Truncate(0).String() {
			t.Fatalf("%q accepted: its integer part is not written canonically", s)
		}
	})
}

// FuzzParseID: an id is accepted only in its canonical decimal form.
func FuzzParseID(f *testing.F) {
	for _, s := range []string{"1", "01", "+1", "-1", "0", "9223372036854775807", "9223372036854775808", "1e3", " 1", "١"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := ParseID(s)
		if err != nil {
			return
		}
		if n <= 0 || strconv.FormatInt(n, 10) != s {
			t.Fatalf("%q accepted as %d", s, n)
		}
	})
}
