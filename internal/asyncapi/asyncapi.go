// Package asyncapi holds the contract of what bidgate sends unasked: the
// AsyncAPI 3.0 document of the Kafka topics it produces and of the messages
// its WebSocket viewers receive, with a JSON Schema (draft 2020-12) for every
// payload, header set and key in schemas/. The files are written by hand and
// are the source of truth; this package embeds them and compiles the schemas
// so that the tests of the producers (persist's relay, the outbox relay the
// closer feeds, fanout) check what they actually emit, and an undocumented
// field, a renamed one or a number where a decimal string belongs fails the
// test that produced it.
//
// Only tests import it: the producers depend on nothing here, so the
// contract can be read, linted and changed without touching them.
package asyncapi

import (
	"bytes"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/segmentio/kafka-go"
	"go.yaml.in/yaml/v3"
)

// DocumentPath is the document's path in the embedded files; the schemas
// are in schemas/ next to it.
const DocumentPath = "asyncapi.yaml"

// WebSocketChannel is the address of the channel of the live auction view.
const WebSocketChannel = "/ws/auctions/{auctionId}"

// NoticesChannel is the address of the channel of a user's live notices.
const NoticesChannel = "/ws/me"

//go:embed asyncapi.yaml schemas/*.json
var files embed.FS

// base is where the embedded files are taken to live, so that the
// document's relative references ("./schemas/...") and the schemas' own
// ("common.json#/$defs/money") resolve among them; nothing is ever read
// from there.
const base = "file:///bidgate/internal/asyncapi/"

// Message is one message of the document with its compiled schemas.
type Message struct {
	Name    string             // its key under components.messages
	Payload *jsonschema.Schema // the JSON value
	Headers *jsonschema.Schema // nil when the message has none (WebSocket)
	Key     *jsonschema.Schema // the Kafka key; nil for a WebSocket message
}

// Contract is the compiled document: its messages by name and by the
// address of the channel they travel on.
type Contract struct {
	Version  string // info.version
	messages map[string]*Message
	channels map[string][]*Message
}

var loaded = sync.OnceValues(Load)

// Default is the embedded document, compiled once.
func Default() (*Contract, error) { return loaded() }

// Load parses the embedded document, resolves every reference and compiles
// every schema, checking that each example of a message validates.
func Load() (*Contract, error) {
	raw, err := files.ReadFile(DocumentPath)
	if err != nil {
		return nil, err
	}
	var doc document
	dec := yaml.NewDecoder(bytes.NewReader(raw))
	dec.KnownFields(true)
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%s: %w", DocumentPath, err)
	}
	if !strings.HasPrefix(doc.AsyncAPI, "3.") {
		return nil, fmt.Errorf("%s: asyncapi %q, want 3.x", DocumentPath, doc.AsyncAPI)
	}
	if doc.Info.Version == "" {
		return nil, fmt.Errorf("%s: no info.version", DocumentPath)
	}
	compiler, err := newCompiler()
	if err != nil {
		return nil, err
	}
	c := &Contract{Version: doc.Info.Version, messages: map[string]*Message{}, channels: map[string][]*Message{}}
	for name, m := range doc.Components.Messages {
		msg, err := m.compile(compiler, name)
		if err != nil {
			return nil, fmt.Errorf("message %s: %w", name, err)
		}
		c.messages[name] = msg
	}
	for id, ch := range doc.Channels {
		if ch.Address == "" {
			return nil, fmt.Errorf("channel %s: no address", id)
		}
		if len(ch.Messages) == 0 {
			return nil, fmt.Errorf("channel %s: no message", id)
		}
		for key, r := range ch.Messages {
			name, ok := strings.CutPrefix(r.Ref, "#/components/messages/")
			if !ok || c.messages[name] == nil {
				return nil, fmt.Errorf("channel %s, message %s: %q names no message of components", id, key, r.Ref)
			}
			c.channels[ch.Address] = append(c.channels[ch.Address], c.messages[name])
		}
	}
	for id, op := range doc.Operations {
		if err := op.check(doc); err != nil {
			return nil, fmt.Errorf("operation %s: %w", id, err)
		}
	}
	return c, nil
}

// newCompiler is a compiler that knows every embedded schema and loads
// nothing else, asserting formats (date-time, uuid) rather than only
// annotating with them.
func newCompiler() (*jsonschema.Compiler, error) {
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	c.UseLoader(refuseLoader{})
	names, err := fs.Glob(files, "schemas/*.json")
	if err != nil || len(names) == 0 {
		return nil, fmt.Errorf("no embedded schema: %v", err)
	}
	for _, name := range names {
		b, err := files.ReadFile(name)
		if err != nil {
			return nil, err
		}
		v, err := decodeJSON(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
		if err := c.AddResource(base+name, v); err != nil {
			return nil, fmt.Errorf("%s: %w", name, err)
		}
	}
	return c, nil
}

// refuseLoader is asked only for a schema that is not embedded: a
// reference to the network or the disk has no place in the contract.
type refuseLoader struct{}

func (refuseLoader) Load(u string) (any, error) {
	return nil, fmt.Errorf("%s is not one of the embedded schemas", u)
}

// Message returns the message named name under components.messages.
func (c *Contract) Message(name string) (*Message, error) {
	m := c.messages[name]
	if m == nil {
		return nil, fmt.Errorf("the AsyncAPI document has no message %q", name)
	}
	return m, nil
}

// Messages returns the names of every message, sorted.
func (c *Contract) Messages() []string {
	names := make([]string, 0, len(c.messages))
	for n := range c.messages {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// Channel returns the messages of the channel at address (a Kafka topic,
// or WebSocketChannel).
func (c *Contract) Channel(address string) ([]*Message, error) {
	ms := c.channels[address]
	if len(ms) == 0 {
		return nil, fmt.Errorf("the AsyncAPI document has no channel %q", address)
	}
	return ms, nil
}

// ValidateKafka checks a message as a consumer reads it: its topic is a
// channel of the document, and its key, headers (the signature's) and value
// are one of that channel's messages.
func (c *Contract) ValidateKafka(m kafka.Message) error {
	return c.validateKafka(m, true)
}

// ValidateKafkaUnsigned is ValidateKafka for a relay run without a signing
// key (--insecure-cluster, and tests of other things): the message must
// carry no header at all; its key and value are checked the same.
func (c *Contract) ValidateKafkaUnsigned(m kafka.Message) error {
	if len(m.Headers) != 0 {
		return fmt.Errorf("%s message %s: unsigned, yet it has headers %v", m.Topic, m.Key, headerKeys(m.Headers))
	}
	return c.validateKafka(m, false)
}

func (c *Contract) validateKafka(m kafka.Message, signed bool) error {
	ms, err := c.Channel(m.Topic)
	if err != nil {
		return err
	}
	var errs []error
	for _, msg := range ms {
		err := msg.validateKafka(m, signed)
		if err == nil {
			return nil
		}
		errs = append(errs, fmt.Errorf("not message %s: %w", msg.Name, err))
	}
	return fmt.Errorf("%s message with key %q and value %s: %w", m.Topic, m.Key, m.Value, errors.Join(errs...))
}

func (m *Message) validateKafka(km kafka.Message, signed bool) error {
	if m.Key == nil {
		return errors.New("the document gives it no Kafka key")
	}
	if !utf8.Valid(km.Key) {
		return errors.New("key: not UTF-8")
	}
	if err := m.Key.Validate(string(km.Key)); err != nil {
		return fmt.Errorf("key: %w", err)
	}
	if signed {
		if m.Headers == nil {
			return errors.New("the document gives it no headers")
		}
		headers := make(map[string]any, len(km.Headers))
		for _, h := range km.Headers {
			if _, dup := headers[h.Key]; dup {
				return fmt.Errorf("header %s twice", h.Key)
			}
			if !utf8.Valid(h.Value) {
				return fmt.Errorf("header %s: not UTF-8", h.Key)
			}
			headers[h.Key] = string(h.Value)
		}
		if err := m.Headers.Validate(headers); err != nil {
			return fmt.Errorf("headers: %w", err)
		}
	}
	return m.ValidatePayload(km.Value)
}

// ValidateWebSocket checks a text frame a viewer received against the
// messages of WebSocketChannel: it must be exactly one of them.
func (c *Contract) ValidateWebSocket(frame []byte) error {
	return c.ValidateWebSocketOn(WebSocketChannel, frame)
}

// ValidateWebSocketOn checks a frame against the messages of the WebSocket
// channel at address: it must be exactly one of them.
func (c *Contract) ValidateWebSocketOn(address string, frame []byte) error {
	ms, err := c.Channel(address)
	if err != nil {
		return err
	}
	var errs []error
	var matched []string
	for _, msg := range ms {
		if err := msg.ValidatePayload(frame); err != nil {
			errs = append(errs, fmt.Errorf("not message %s: %w", msg.Name, err))
			continue
		}
		matched = append(matched, msg.Name)
	}
	switch len(matched) {
	case 0:
		return fmt.Errorf("WebSocket frame %s: %w", frame, errors.Join(errs...))
	case 1:
		return nil
	default:
		return fmt.Errorf("WebSocket frame %s is each of %v: the document cannot tell them apart", frame, matched)
	}
}

// ValidatePayload checks a JSON value against m's payload schema. The value
// must be I-JSON (RFC 7493: UTF-8, no member named twice) as every JSON
// bidgate writes is; numbers keep their precision.
func (m *Message) ValidatePayload(b []byte) error {
	v, err := decodeJSON(b)
	if err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	if err := m.Payload.Validate(v); err != nil {
		return fmt.Errorf("payload: %w", err)
	}
	return nil
}

// decodeJSON decodes one strict JSON value, numbers as json.Number.
func decodeJSON(b []byte) (any, error) {
	if !jsontext.Value(b).IsValid() {
		return nil, fmt.Errorf("not one valid I-JSON value (RFC 7493): %.200s", b)
	}
	return jsonschema.UnmarshalJSON(bytes.NewReader(b))
}

func headerKeys(hs []kafka.Header) []string {
	keys := make([]string, len(hs))
	for i, h := range hs {
		keys[i] = h.Key
	}
	return keys
}

// ValidateKafka is Default().ValidateKafka.
func ValidateKafka(m kafka.Message) error {
	c, err := Default()
	if err != nil {
		return err
	}
	return c.ValidateKafka(m)
}

// ValidateKafkaUnsigned is Default().ValidateKafkaUnsigned.
func ValidateKafkaUnsigned(m kafka.Message) error {
	c, err := Default()
	if err != nil {
		return err
	}
	return c.ValidateKafkaUnsigned(m)
}

// ValidateWebSocket is Default().ValidateWebSocket.
func ValidateWebSocket(frame []byte) error {
	c, err := Default()
	if err != nil {
		return err
	}
	return c.ValidateWebSocket(frame)
}

// ValidateWebSocketOn checks a frame of the WebSocket channel at address
// against the default contract.
func ValidateWebSocketOn(address string, frame []byte) error {
	c, err := Default()
	if err != nil {
		return err
	}
	return c.ValidateWebSocketOn(address, frame)
}

// resolve turns a reference of the document ("./schemas/x.json") into the
// URL its schema was added under.
func resolve(ref string) (string, error) {
	if ref == "" {
		return "", errors.New("no $ref")
	}
	b, err := url.Parse(base + DocumentPath)
	if err != nil {
		return "", err
	}
	r, err := url.Parse(ref)
	if err != nil {
		return "", fmt.Errorf("$ref %q: %w", ref, err)
	}
	if r.IsAbs() || r.Host != "" || strings.HasPrefix(r.Path, "/") {
		return "", fmt.Errorf("$ref %q: only a path relative to the document is allowed", ref)
	}
	return b.ResolveReference(r).String(), nil
}
