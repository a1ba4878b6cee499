// Package prompt turns an OpenAI request into what the engine will compute:
// the rendered prompt, its token ids and the hashes of its full KV blocks,
// the way vLLM prepares a chat or completion request.
//
// prompt starts no goroutines, does no I/O and keeps no globals. A Preparer
// is immutable and safe for concurrent use.
package prompt

import (
	"errors"
	"fmt"
	"time"

	"github.com/inferrail/inferrail/model/prefix"
	"github.com/inferrail/inferrail/model/template"
	"github.com/inferrail/inferrail/model/token/hf"
)

// Preparer prepares requests for one model.
type Preparer struct {
	Model     string         // salts the block hash chain
	Tokenizer *hf.Tokenizer  // the model's tokenizer
	Template  *template.Chat // its chat template; nil for models without one
	BlockSize int            // tokens per KV block (vLLM's --block-size)
	// Kwargs are the server's default chat_template_kwargs; a request's own
	// override them key by key, as vLLM merges them.
	Kwargs *template.Dict
}

// Prompt is a prepared request.
type Prompt struct {
	Text   string        // the rendered prompt (the text itself for a completion)
	IDs    []uint32      // its token ids, as the engine will see them
	Blocks []prefix.Hash // hashes of its full blocks, chained from the model's root
}

// ErrNoTemplate is returned for a chat request to a model without a chat
// template.
var ErrNoTemplate = errors.New("prompt: the model has no chat template")

// Chat prepares a /v1/chat/completions body: its messages and tools rendered
// with the model's chat template (add_generation_prompt, continue_final_message
// and chat_template_kwargs as vLLM reads them), then tokenized without adding
// special tokens (the template places them), then hashed. now is the clock
// strftime_now reads.
func (p *Preparer) Chat(body []byte, now time.Time) (Prompt, error) {
	if p.Template == nil {
		return Prompt{}, ErrNoTemplate
	}
	v, err := template.ParseJSON(body)
	if err != nil {
		return Prompt{}, fmt.Errorf("prompt: %w", err)
	}
	req, ok := v.(*template.Dict)
	if !ok {
		return Prompt{}, errors.New("prompt: the body is not a JSON object")
	}
	msgs, _ := req.GetString("messages")
	list, ok := msgs.(template.List)
	if !ok {
		return Prompt{}, errors.New("prompt: messages is not a list")
	}
	for _, m := range list {
		if err := normalizeMessage(m); err != nil {
			return Prompt{}, err
		}
	}
	return p.Render(req, now)
}

// Render is Chat for a request whose messages are already as vLLM hands
// them to the template (content parts joined, tool call arguments parsed).
func (p *Preparer) Render(req *template.Dict, now time.Time) (Prompt, error) {
	if p.Template == nil {
		return Prompt{}, ErrNoTemplate
	}
	msgs, _ := req.GetString("messages")
	list, ok := msgs.(template.List)
	if !ok {
		return Prompt{}, errors.New("prompt: messages is not a list")
	}
	var tools template.Value
	if t, ok := req.GetString("tools"); ok {
		tools = t
	}
	addGen := boolOr(req, "add_generation_prompt", true)
	if boolOr(req, "continue_final_message", false) {
		addGen = false
	}
	kwargs := template.NewDict(4)
	if p.Kwargs != nil {
		for _, k := range p.Kwargs.Keys() {
			val, _ := p.Kwargs.Get(k)
			kwargs.Set(k, val)
		}
	}
	if kw, ok := req.GetString("chat_template_kwargs"); ok {
		if d, ok := kw.(*template.Dict); ok {
			for _, k := range d.Keys() {
				val, _ := d.Get(k)
				kwargs.Set(k, val)
			}
		}
	}
	text, err := p.Template.Apply(list, tools, addGen, kwargs, now)
	if err != nil {
		return Prompt{}, fmt.Errorf("prompt: chat template: %w", err)
	}
	salt := ""
	if s, ok := req.GetString("cache_salt"); ok {
		salt, _ = s.(string)
	}
	return p.finish(text, false, salt), nil
}

// Text prepares a completion prompt: tokenized with the tokenizer's own
// special tokens added, as vLLM does for /v1/completions.
func (p *Preparer) Text(text, cacheSalt string) Prompt {
	return p.finish(text, true, cacheSalt)
}

func (p *Preparer) finish(text string, addSpecial bool, salt string) Prompt {
	ids := p.Tokenizer.Encode(nil, text, addSpecial)
	var h prefix.Hasher
	bs := p.BlockSize
	if bs <= 0 {
		bs = 16
	}
	blocks := h.Chain(make([]prefix.Hash, 0, len(ids)/bs), prefix.Root(p.Model, "", salt), ids, bs)
	return Prompt{Text: text, IDs: ids, Blocks: blocks}
}

// normalizeMessage does what vLLM does to a message before the template
// sees it: text content parts are joined with newlines (the "string"
// content format), and a tool call's arguments given as a JSON string are
// parsed into an object.
func normalizeMessage(m template.Value) error {
	d, ok := m.(*template.Dict)
	if !ok {
		return errors.New("prompt: a message is not an object")
	}
	if c, ok := d.GetString("content"); ok {
		if parts, ok := c.(template.List); ok {
			text := ""
			for i, part := range parts {
				pd, ok := part.(*template.Dict)
				if !ok {
					return errors.New("prompt: a content part is not an object")
				}
				if typ, _ := pd.GetString("type"); typ != "text" {
					return fmt.Errorf("prompt: content part of type %v is not supported", typ)
				}
				t, _ := pd.GetString("text")
				s, _ := t.(string)
				if i > 0 {
					text += "\n"
				}
				text += s
			}
			d.SetString("content", text)
		}
	}
	if tc, ok := d.GetString("tool_calls"); ok {
		calls, _ := tc.(template.List)
		for _, call := range calls {
			cd, ok := call.(*template.Dict)
			if !ok {
				continue
			}
			fn, _ := cd.GetString("function")
			fd, ok := fn.(*template.Dict)
			if !ok {
				continue
			}
			if args, ok := fd.GetString("arguments"); ok {
				if s, ok := args.(string); ok {
					if parsed, err := template.ParseJSON([]byte(s)); err == nil {
						fd.SetString("arguments", parsed)
					}
				}
			}
		}
	}
	return nil
}

func boolOr(d *template.Dict, key string, def bool) bool {
	v, ok := d.GetString(key)
	if !ok {
		return def
	}
	b, ok := v.(bool)
	if !ok {
		return def
	}
	return b
}
