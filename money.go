package bidgate

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/shopspring/decimal"
)

// MaxAmount is the largest value of the NUMERIC(14,2) columns money is kept in.
var MaxAmount = decimal.RequireFromString("999999999999.99")

// ParseMoney parses an amount written in plain decimal notation with at most
// two decimals: digits with no leading zero (a lone 0 before the point is
// the zero itself), optionally a point and one or two more digits, at most
// 15 digits before it. No sign, no exponent: like an id, an amount has one
// way to be written, so "05000" is refused as "01" is. The range is checked
// by CheckMoney.
//
// It reads the digits itself rather than with a regular expression and
// decimal.NewFromString: every bid's amounts are parsed on the way in and
// again by the persister and the notifier, and the two cost 1.5 % of a node's
// CPU in a flash sale.
func ParseMoney(s string) (decimal.Decimal, error) {
	whole, frac, point := strings.Cut(s, ".")
	ok := len(whole) >= 1 && len(whole) <= 15 && (whole[0] != '0' || len(whole) == 1) &&
		(!point || len(frac) >= 1 && len(frac) <= 2)
	var v int64
	for i := 0; ok && i < len(whole)+len(frac); i++ {
		c := byte(0)
		if i < len(whole) {
			c = whole[i]
		} else {
			c = frac[i-len(whole)]
		}
		ok = c >= '0' && c <= '9'
		v = v*10 + int64(c-'0')
	}
	if !ok {
		return decimal.Decimal{}, fmt.Errorf("%q is not a plain decimal with at most two decimals", s)
	}
	return decimal.New(v, -int32(len(frac))), nil
}

// CheckMoney checks that d fits NUMERIC(14,2) and is positive (or zero, when
// zeroOK). field names the input in the error.
func CheckMoney(field string, d decimal.Decimal, zeroOK bool) error {
	switch {
	case d.IsNegative():
		return InvalidInput("invalid_amount", field+" must not be negative")
	case d.IsZero() && !zeroOK:
		return InvalidInput("invalid_amount", field+" must be greater than zero")
	case d.GreaterThan(MaxAmount):
		return InvalidInput("invalid_amount", field+" must be at most "+MaxAmount.StringFixed(2))
	case !d.Equal(d.Truncate(2)):
		return InvalidInput("invalid_amount", field+" must have at most two decimals")
	}
	return nil
}

// FormatMoney writes an amount the way every response does: a string with
// exactly two decimals.
//
// An amount of at most two decimals (every amount bidgate keeps) is written
// from its integer cents: decimal's StringFixed rounds through big.Int, and
// a hot auction formats the price and the minimum bid of every refusal.
func FormatMoney(d decimal.Decimal) string {
	exp := d.Exponent()
	if exp < -2 || exp > 0 || d.NumDigits() > 16 {
		return d.StringFixed(2)
	}
	cents := d.CoefficientInt64() // below 10^16, times at most 100
	for ; exp > -2; exp-- {
		cents *= 10
	}
	return FormatCents(cents)
}

// FormatCents writes an amount given in cents as FormatMoney does, without
// going through a decimal.
func FormatCents(c int64) string {
	var buf [24]byte
	b := buf[:0]
	u := uint64(c)
	if c < 0 {
		b = append(b, '-')
		u = -u
	}
	b = strconv.AppendUint(b, u/100, 10)
	b = append(b, '.', byte('0'+u%100/10), byte('0'+u%10))
	return string(b)
}

// Money is an amount read from JSON, given either as a number (1250000.5) or a
// string ("1250000.50"), always in plain decimal notation.
type Money struct {
	decimal.Decimal
	Set bool // the field was present
}

// UnmarshalJSON keeps the literal text of the number so that no float64 is
// ever involved and "2000.100" is seen as three decimals. A string without
// an escape, as clients write amounts, is read between its quotes; one with
// is unquoted with jsontext into a buffer on the stack (encoding/json's
// decoder, for the few bytes of every amount of every bid, cost nearly
// three times as much).
func (m *Money) UnmarshalJSON(b []byte) error {
	var buf [32]byte
	text := b
	if len(b) > 0 && b[0] == '"' {
		if len(b) >= 2 && b[len(b)-1] == '"' && bytes.IndexByte(b[1:len(b)-1], '\\') < 0 {
			text = b[1 : len(b)-1] // ParseMoney refuses anything but digits and a point
		} else {
			raw, err := jsontext.AppendUnquote(buf[:0], b)
			if err != nil {
				return err
			}
			text = raw
		}
	}
	d, err := ParseMoney(string(text))
	if err != nil {
		return err
	}
	m.Decimal, m.Set = d, true
	return nil
}

// MarshalJSON writes the amount as a string with two decimals.
func (m Money) MarshalJSON() ([]byte, error) {
	return json.Marshal(FormatMoney(m.Decimal))
}

// Cents is an amount in integer minor units, the form money takes in Redis.
// The amount must have at most two decimals (CheckMoney).
func Cents(d decimal.Decimal) int64 { return d.Shift(2).IntPart() }

// FromCents is the inverse of Cents.
func FromCents(c int64) decimal.Decimal { return decimal.New(c, -2) }
