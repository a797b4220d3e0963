package bidgate

import (
	"strconv"
	"testing"
)

// FuzzParseMoney: whatever the input, ParseMoney does not panic, and an
// amount it accepts survives the trip to cents (Redis) and back exactly.
func FuzzParseMoney(f *testing.F) {
	for _, s := range []string{"0", "1", "1250000.5", "999999999999.99", "2000.100", "1e3", "-1", "+1", "NaN", " 1", "1.", ".5", "０"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		d, err := ParseMoney(s)
		if err != nil {
			return
		}
		if back := FromCents(Cents(d)); !back.Equal(d) {
			t.Fatalf("%q: %s -> %d cents -> %s", s, d, Cents(d), back)
		}
		if again, err := ParseMoney(FormatMoney(d)); err != nil || !again.Equal(d) {
			t.Fatalf("%q: formatted %q parses to %s, %v", s, FormatMoney(d), again, err)
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
