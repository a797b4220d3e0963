package bench

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/uuid"
)

// bidAnswer holds the fields of a 201/200 body and of a problem document.
type bidAnswer struct {
	Seq          int64
	AcceptedAt   time.Time
	EndTime      time.Time
	Code         string
	Kind         string // the row's: straight, proxy, buy_now
	Amount       string // the row's amount
	MaxAmount    string // a maximum the body shows (only the bidder's own may)
	Leading      bool
	CurrentPrice string
}

// answerDecoder reads a bid answer's few fields token by token and skips
// the rest: decoding the whole body into a struct by reflection was the
// largest part of bidbench's own CPU per request after the syscalls.
type answerDecoder struct {
	rd  bytes.Reader
	dec jsontext.Decoder
}

var errNotObject = errors.New("not a JSON object")

// decode fills a from body, a JSON object; other fields and nested values
// are skipped.
func (d *answerDecoder) decode(body []byte, a *bidAnswer) error {
	d.rd.Reset(body)
	d.dec.Reset(&d.rd)
	tok, err := d.dec.ReadToken()
	if err != nil {
		return err
	}
	if tok.Kind() != '{' {
		return errNotObject
	}
	for d.dec.PeekKind() == '"' {
		name, err := d.dec.ReadValue() // quoted and valid until the next read
		if err != nil {
			return err
		}
		switch string(name) {
		case `"seq"`:
			tok, err := d.dec.ReadToken()
			if err != nil {
				return err
			}
			if tok.Kind() != '0' {
				return fmt.Errorf("seq is not a number")
			}
			if a.Seq, err = tok.Int(); err != nil {
				return fmt.Errorf("seq: %w", err)
			}
		case `"acceptedAt"`, `"endTime"`:
			// Chosen before the next read overwrites name.
			at, field := &a.AcceptedAt, "acceptedAt"
			if string(name) == `"endTime"` {
				at, field = &a.EndTime, "endTime"
			}
			v, err := d.dec.ReadValue()
			if err != nil {
				return err
			}
			if err := at.UnmarshalJSON(v); err != nil {
				return fmt.Errorf("%s: %w", field, err)
			}
		case `"code"`:
			tok, err := d.dec.ReadToken()
			if err != nil {
				return err
			}
			if tok.Kind() != '"' {
				return fmt.Errorf("code is not a string")
			}
			a.Code = tok.String()
		case `"kind"`:
			v, err := d.dec.ReadValue()
			if err != nil {
				return err
			}
			a.Kind = rowKindOf(v)
		case `"amount"`, `"maxAmount"`, `"currentPrice"`:
			// Chosen before the next read overwrites name.
			dst := &a.Amount
			switch string(name) {
			case `"maxAmount"`:
				dst = &a.MaxAmount
			case `"currentPrice"`:
				dst = &a.CurrentPrice
			}
			v, err := d.dec.ReadValue()
			if err != nil {
				return err
			}
			*dst = valueText(v)
		case `"leading"`:
			tok, err := d.dec.ReadToken()
			if err != nil {
				return err
			}
			if k := tok.Kind(); k != 't' && k != 'f' {
				return fmt.Errorf("leading is not a boolean")
			}
			a.Leading = tok.Bool()
		default:
			if err := d.dec.SkipValue(); err != nil {
				return err
			}
		}
	}
	if _, err := d.dec.ReadToken(); err != nil { // the closing brace
		return err
	}
	return nil
}

// rowKindOf is a kind value's text: one of the row kinds without
// allocating, anything else as valueText writes it.
func rowKindOf(v jsontext.Value) string {
	for _, k := range []string{rowStraight, rowProxy, rowAuto, rowBuyNow} {
		if len(v) == len(k)+2 && string(v[1:len(v)-1]) == k && v[0] == '"' {
			return k
		}
	}
	return valueText(v)
}

// valueText is a JSON value as text: a string's content, null as "",
// anything else (a maximum leaked as a number, say) as its JSON.
func valueText(v jsontext.Value) string {
	switch v.Kind() {
	case '"':
		s, err := jsontext.AppendUnquote(nil, v)
		if err != nil {
			return string(v)
		}
		return string(s)
	case 'n':
		return ""
	}
	return string(v)
}

// appendUUID appends u in its canonical text form (what u.String()
// returns) without allocating.
func appendUUID(dst []byte, u uuid.UUID) []byte {
	var buf [36]byte
	hex.Encode(buf[0:8], u[0:4])
	buf[8] = '-'
	hex.Encode(buf[9:13], u[4:6])
	buf[13] = '-'
	hex.Encode(buf[14:18], u[6:8])
	buf[18] = '-'
	hex.Encode(buf[19:23], u[8:10])
	buf[23] = '-'
	hex.Encode(buf[24:], u[10:])
	return append(dst, buf[:]...)
}
