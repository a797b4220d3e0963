package asyncapi

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// document is the part of an AsyncAPI 3 document this package reads. Load
// decodes it with unknown fields refused, so every field the document uses
// is named here, and a misspelt one fails at once rather than being lost.
type document struct {
	AsyncAPI           string `yaml:"asyncapi"`
	Info               info   `yaml:"info"`
	DefaultContentType string `yaml:"defaultContentType"`
	Servers            map[string]struct {
		Host        string `yaml:"host"`
		Protocol    string `yaml:"protocol"`
		Description string `yaml:"description"`
	} `yaml:"servers"`
	Channels   map[string]channel   `yaml:"channels"`
	Operations map[string]operation `yaml:"operations"`
	Components struct {
		Messages map[string]message `yaml:"messages"`
	} `yaml:"components"`
}

type info struct {
	Title       string `yaml:"title"`
	Version     string `yaml:"version"`
	Description string `yaml:"description"`
	License     struct {
		Name string `yaml:"name"`
	} `yaml:"license"`
}

type ref struct {
	Ref string `yaml:"$ref"`
}

type channel struct {
	Address     string         `yaml:"address"`
	Title       string         `yaml:"title"`
	Description string         `yaml:"description"`
	Servers     []ref          `yaml:"servers"`
	Parameters  map[string]any `yaml:"parameters"`
	Messages    map[string]ref `yaml:"messages"`
	Bindings    map[string]any `yaml:"bindings"`
}

type operation struct {
	Action   string `yaml:"action"`
	Title    string `yaml:"title"`
	Summary  string `yaml:"summary"`
	Channel  ref    `yaml:"channel"`
	Messages []ref  `yaml:"messages"`
}

type message struct {
	Name        string `yaml:"name"`
	Title       string `yaml:"title"`
	Summary     string `yaml:"summary"`
	ContentType string `yaml:"contentType"`
	Headers     *ref   `yaml:"headers"`
	Payload     ref    `yaml:"payload"`
	Bindings    struct {
		Kafka *struct {
			Key            ref    `yaml:"key"`
			BindingVersion string `yaml:"bindingVersion"`
		} `yaml:"kafka"`
	} `yaml:"bindings"`
	Examples []struct {
		Name    string         `yaml:"name"`
		Summary string         `yaml:"summary"`
		Headers map[string]any `yaml:"headers"`
		Payload any            `yaml:"payload"`
	} `yaml:"examples"`
}

// compile compiles m's schemas and checks its examples against them.
func (m message) compile(c *jsonschema.Compiler, name string) (*Message, error) {
	if m.Name != name {
		return nil, fmt.Errorf("name %q, want its key %q", m.Name, name)
	}
	if m.ContentType != "" && m.ContentType != "application/json" {
		return nil, fmt.Errorf("content type %q: only JSON is described", m.ContentType)
	}
	schema := func(what string, r ref) (*jsonschema.Schema, error) {
		u, err := resolve(r.Ref)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		s, err := c.Compile(u)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		return s, nil
	}
	out := &Message{Name: name}
	var err error
	if out.Payload, err = schema("payload", m.Payload); err != nil {
		return nil, err
	}
	if m.Headers != nil {
		if out.Headers, err = schema("headers", *m.Headers); err != nil {
			return nil, err
		}
	}
	if k := m.Bindings.Kafka; k != nil {
		if out.Key, err = schema("Kafka key", k.Key); err != nil {
			return nil, err
		}
		if m.Headers == nil {
			return nil, errors.New("a Kafka message without headers: every one is signed")
		}
	}
	if len(m.Examples) == 0 {
		return nil, errors.New("no example")
	}
	for _, ex := range m.Examples {
		if err := out.checkExample(ex.Headers, ex.Payload); err != nil {
			return nil, fmt.Errorf("example %s: %w", ex.Name, err)
		}
	}
	return out, nil
}

// checkExample validates an example as it would travel: the payload as
// JSON, the headers as strings.
func (m *Message) checkExample(headers map[string]any, payload any) error {
	b, err := json.Marshal(payload)
	if err != nil {
		return err
	}
	if err := m.ValidatePayload(b); err != nil {
		return err
	}
	if (headers != nil) != (m.Headers != nil) {
		return fmt.Errorf("headers %v where the message's schema has %v", headers != nil, m.Headers != nil)
	}
	if m.Headers != nil {
		hb, err := json.Marshal(headers)
		if err != nil {
			return err
		}
		v, err := decodeJSON(hb)
		if err != nil {
			return err
		}
		if err := m.Headers.Validate(v); err != nil {
			return fmt.Errorf("headers: %w", err)
		}
	}
	return nil
}

// check resolves an operation's channel and messages, which must be that
// channel's.
func (op operation) check(doc document) error {
	if op.Action != "send" && op.Action != "receive" {
		return fmt.Errorf("action %q", op.Action)
	}
	id, ok := strings.CutPrefix(op.Channel.Ref, "#/channels/")
	ch, found := doc.Channels[id]
	if !ok || !found {
		return fmt.Errorf("channel %q names no channel", op.Channel.Ref)
	}
	if len(op.Messages) == 0 {
		return errors.New("no message")
	}
	for _, r := range op.Messages {
		key, ok := strings.CutPrefix(r.Ref, "#/channels/"+id+"/messages/")
		if _, found := ch.Messages[key]; !ok || !found {
			return fmt.Errorf("message %q is not one of channel %s's", r.Ref, id)
		}
	}
	return nil
}
