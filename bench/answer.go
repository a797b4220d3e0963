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
	Seq        int64
	AcceptedAt time.Time
	EndTime    time.Time
	Code       string
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
