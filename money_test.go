package bidgate

import (
	"encoding/json"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/shopspring/decimal"
)

func TestMoneyFromJSON(t *testing.T) {
	cases := []struct {
		in   string
		want string // "" means rejected
	}{
		{`1250000`, "1250000.00"},
		{`"1250000"`, "1250000.00"},
		{`1250000.5`, "1250000.50"},
		{`"2000.10"`, "2000.10"},
		{`"0"`, "0.00"},
		{`"999999999999.99"`, "999999999999.99"},
		{`"2000.100"`, ""}, // three decimals, even if the third is zero
		{`1e3`, ""},
		{`"1E3"`, ""},
		{`-5`, ""},
		{`"+5"`, ""},
		{`"NaN"`, ""},
		{`"Infinity"`, ""},
		{`"1."`, ""},
		{`".5"`, ""},
		{`" 5"`, ""},
		{`""`, ""},
		{`null`, ""},
		{`true`, ""},
		{`"1234567890123456"`, ""}, // too many digits to even parse
		{`"0.50"`, "0.50"},
		{`0.5`, "0.50"},
		{`"100"`, "100.00"},
		{`"05000"`, ""}, // a leading zero, refused like the id 01
		{`"00.5"`, ""},
		{`"00"`, ""},
		{`"007.10"`, ""},
		{`05000`, ""},                 // not even a JSON number
		{`"\u0032000.10"`, "2000.10"}, // an escaped digit is the digit
		{`"2000\u002e10"`, "2000.10"},
		{`"2000\n"`, ""},
		{`"\u00312"`, "12.00"},
	}
	decoders := map[string]func([]byte, any) error{
		"encoding/json": json.Unmarshal,
		"json/v2":       func(b []byte, v any) error { return jsonv2.Unmarshal(b, v) }, // the gateway's
	}
	for name, decode := range decoders {
		for _, c := range cases {
			var m Money
			err := decode([]byte(c.in), &m)
			switch {
			case c.want == "" && err == nil:
				t.Errorf("%s: %s: accepted as %s, want an error", name, c.in, FormatMoney(m.Decimal))
			case c.want != "" && err != nil:
				t.Errorf("%s: %s: %v", name, c.in, err)
			case c.want != "" && FormatMoney(m.Decimal) != c.want:
				t.Errorf("%s: %s: got %s, want %s", name, c.in, FormatMoney(m.Decimal), c.want)
			}
		}
	}
}

// TestMoneyFromMalformedJSON: called directly, with what no decoder
// would pass, UnmarshalJSON refuses rather than reads between the quotes.
func TestMoneyFromMalformedJSON(t *testing.T) {
	for _, in := range []string{`"`, `"12`, `12"`, `"1"2"`, `"1\"`, `"12\u"`, `""12""`} {
		var m Money
		if err := m.UnmarshalJSON([]byte(in)); err == nil || m.Set {
			t.Errorf("%s: accepted as %s", in, FormatMoney(m.Decimal))
		}
	}
}

func TestCheckMoney(t *testing.T) {
	cases := []struct {
		in     string
		zeroOK bool
		ok     bool
	}{
		{"0", true, true},
		{"0", false, false},
		{"0.01", false, true},
		{"999999999999.99", false, true},
		{"1000000000000", false, false},
	}
	for _, c := range cases {
		d, err := ParseMoney(c.in)
		if err != nil {
			t.Fatalf("%s: %v", c.in, err)
		}
		if err := CheckMoney("amount", d, c.zeroOK); (err == nil) != c.ok {
			t.Errorf("CheckMoney(%s, zeroOK=%v) = %v, want ok=%v", c.in, c.zeroOK, err, c.ok)
		}
	}
}

// BenchmarkParseMoney parses the amounts a bid carries.
func BenchmarkParseMoney(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		for _, s := range []string{"1250000.50", "0.5", "999999999999.99", "42"} {
			if _, err := ParseMoney(s); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkMoneyFromJSON decodes an amount as a bid's body carries it.
func BenchmarkMoneyFromJSON(b *testing.B) {
	in := []byte(`"1250000.50"`)
	b.ReportAllocs()
	for b.Loop() {
		var m Money
		if err := m.UnmarshalJSON(in); err != nil {
			b.Fatal(err)
		}
	}
}

// TestFormatMoney: every amount is written as decimal's StringFixed(2)
// writes it, the ones formatted from their cents as the rest.
func TestFormatMoney(t *testing.T) {
	for _, in := range []string{
		"0", "0.00", "0.05", "0.5", "1", "10", "1210.00", "1200.1", "999999999999.99", "100000000000000",
		"-0.05", "-1200.5", "-7", "0.001", "0.005", "0.015", "-0.015", "1.999", "12345678901234567890.12",
		"99999999999999.99", "9999999999999999", "99999999999999999", "1e3", "1.5e2", "123e-5",
	} {
		d := decimal.RequireFromString(in)
		if got, want := FormatMoney(d), d.StringFixed(2); got != want {
			t.Errorf("FormatMoney(%s) = %s, want %s", in, got, want)
		}
	}
	if got := FormatMoney(decimal.Decimal{}); got != "0.00" {
		t.Errorf("the zero Decimal: %s", got)
	}
	if got := FormatMoney(decimal.New(12, 1)); got != "120.00" {
		t.Errorf("12e1: %s", got)
	}
}

// BenchmarkFormatMoney: a price as a refusal formats it.
func BenchmarkFormatMoney(b *testing.B) {
	d := decimal.RequireFromString("1210.50")
	b.ReportAllocs()
	for b.Loop() {
		_ = FormatMoney(d)
	}
}
