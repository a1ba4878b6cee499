// Package prompt turns an OpenAI request into what the engine will compute:
// the rendered prompt, its token ids and the hashes of its full KV blocks,
// the way vLLM prepares a chat or completion request, or the way the
// simulator does for a model served with the builtin:sim tokenizer.
//
// prompt starts no goroutines, does no I/O and keeps no globals. A Preparer
// is immutable and safe for concurrent use; its optional piece cache is a
// concurrent structure of its own (hf.PieceCache).
package prompt

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/inferrail/inferrail/model/anthropic"
	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/model/prefix"
	"github.com/inferrail/inferrail/model/template"
	"github.com/inferrail/inferrail/model/token"
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
	// Cache, when set, keeps the ids of the prompt pieces Tokenizer has
	// encoded before (a system prompt, the earlier turns of a conversation)
	// so that they are encoded once. It must be Tokenizer's
	// (hf.Tokenizer.NewCache); the ids are the same with it or without it.
	Cache *hf.PieceCache
	// ContentFormat is how message content reaches the template, as vLLM's
	// --chat-template-content-format: "string" (text parts joined with
	// newlines), "openai" (a list of {"type": "text", "text": ...} parts)
	// or "auto" (what vLLM detects in the template, see
	// template.Chat.ContentFormat). "" is "string".
	ContentFormat string
	// Sim prepares requests as the simulator does (tokenizer builtin:sim):
	// chats parsed as it parses them and rendered with SimChat, text
	// tokenized with token.Sim. Tokenizer, Template, Kwargs, Cache and
	// ContentFormat are then unused.
	Sim bool
	// InlineSystem places the inline system messages of Anthropic Messages
	// requests (vLLM's --anthropic-inline-system); the zero value is
	// anthropic.Preserve.
	InlineSystem anthropic.InlineMode
	// DisabledThinkingEffort is the reasoning_effort that an Anthropic
	// request's thinking.type "disabled" becomes (vLLM's
	// --anthropic-disabled-thinking-effort). "" resolves it as vLLM's auto
	// does, by rendering probe prompts for each such request; a loader sets
	// it once from ResolveDisabledThinkingEffort to spare that.
	DisabledThinkingEffort string
	// KeepBillingHeader keeps Claude Code's billing header in the prompts
	// of Anthropic Messages requests (anthropic.Request.KeepBillingHeader),
	// as a router that hashes the text as it came does. vLLM drops it, so
	// a Preparer with it set mispredicts on purpose: only the benchmark of
	// what dropping it is worth sets it (cmd/inferrail bench messages); no
	// config key does.
	KeepBillingHeader bool
}

// Prompt is a prepared request.
type Prompt struct {
	Text   string        // the rendered prompt (the text itself for a completion; "" for token ids)
	IDs    []uint32      // its token ids, as the engine will see them
	Blocks []prefix.Hash // hashes of its full blocks, chained from the model's root
	// Batch is set for the first prompt of a /v1/completions batch, which
	// is all that was prepared: the engine computes every prompt of it and
	// reports their sum, so IDs undercount it.
	Batch bool
}

// ErrNoTemplate is returned for a chat request to a model without a chat
// template.
var ErrNoTemplate = errors.New("prompt: the model has no chat template")

// ErrTemplate wraps an error the chat template raised while rendering a
// request (raise_exception, a type error in the template, a limit).
var ErrTemplate = errors.New("prompt: chat template")

// ErrNoTokenizer is returned for a text prompt to a Preparer without a
// tokenizer: only prompts given as token ids are prepared there.
var ErrNoTokenizer = errors.New("prompt: the model has no tokenizer")

// ErrUnsupported wraps the reasons a well-formed request cannot be
// predicted: content parts other than text (images, audio, ...), a
// chat_template of the request's own, prompt_embeds.
var ErrUnsupported = errors.New("prompt: unsupported request")

func unsupported(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrUnsupported}, args...)...)
}

// Chat prepares a /v1/chat/completions body: its messages and tools rendered
// with the model's chat template (add_generation_prompt, continue_final_message
// and chat_template_kwargs as vLLM reads them), then tokenized without adding
// special tokens (the template places them; add_special_tokens in the body
// changes that, as in vLLM), then hashed. now is the clock strftime_now reads.
func (p *Preparer) Chat(body []byte, now time.Time) (Prompt, error) {
	if p.Sim {
		return p.simChat(body)
	}
	if p.Template == nil {
		return Prompt{}, ErrNoTemplate
	}
	req, err := object(body)
	if err != nil {
		return Prompt{}, err
	}
	if ct, ok := req.GetString("chat_template"); ok && ct != nil {
		// vLLM renders it only with --trust-request-chat-template, which the
		// gateway cannot see.
		return Prompt{}, unsupported("the request has its own chat_template")
	}
	msgs, _ := req.GetString("messages")
	list, ok := msgs.(template.List)
	if !ok {
		return Prompt{}, errors.New("prompt: messages is not a list")
	}
	openaiFormat := p.ContentFormat == "openai"
	if p.ContentFormat == "auto" {
		tools, _ := req.GetString("tools")
		openaiFormat = p.Template.ContentFormat(tools != nil) == "openai"
	}
	for i, m := range list {
		if list[i], err = normalizeMessage(m, openaiFormat); err != nil {
			return Prompt{}, err
		}
	}
	return p.Render(req, now)
}

// Render is Chat for a request whose messages are already as vLLM hands
// them to the template (content parts joined, tool call arguments parsed).
// A reasoning_effort reaches the template with the chat_template_kwargs,
// and sets enable_thinking (false for "none") where they do not, as vLLM's
// ChatCompletionRequest.build_chat_params does.
func (p *Preparer) Render(req *template.Dict, now time.Time) (Prompt, error) {
	if p.Template == nil || p.Sim {
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
	cont := boolOr(req, "continue_final_message", false)
	if cont {
		addGen = false
	}
	kwargs := template.NewDict(4)
	if p.Kwargs != nil {
		for _, k := range p.Kwargs.Keys() {
			val, _ := p.Kwargs.Get(k)
			kwargs.Set(k, val)
		}
	}
	if docs, ok := req.GetString("documents"); ok && docs != nil {
		kwargs.SetString("documents", docs) // transformers' documents argument
	}
	userThinking := false
	if kw, ok := req.GetString("chat_template_kwargs"); ok {
		if d, ok := kw.(*template.Dict); ok {
			for _, k := range d.Keys() {
				val, _ := d.Get(k)
				kwargs.Set(k, val)
			}
			_, userThinking = d.GetString("enable_thinking")
		}
	}
	if e, ok := req.GetString("reasoning_effort"); ok {
		if effort, ok := e.(string); ok {
			// build_chat_params: the effort reaches the template, and
			// turns thinking on (off for "none") unless the request's
			// chat_template_kwargs set enable_thinking.
			kwargs.SetString("reasoning_effort", effort)
			if !userThinking {
				kwargs.SetString("enable_thinking", effort != "none")
			}
		}
	}
	text, err := p.Template.Apply(list, tools, addGen, kwargs, now)
	if err != nil {
		return Prompt{}, fmt.Errorf("%w: %w", ErrTemplate, err)
	}
	if cont && len(list) > 0 {
		if text, err = continueFinal(text, list[len(list)-1]); err != nil {
			return Prompt{}, err
		}
	}
	return p.finish(text, boolOr(req, "add_special_tokens", false), stringOr(req, "cache_salt")), nil
}

// continueFinal cuts the rendered chat after the final message's content,
// leaving it open for the model to continue, as transformers'
// apply_chat_template(continue_final_message=True) does.
func continueFinal(text string, last template.Value) (string, error) {
	d, _ := last.(*template.Dict)
	c, _ := d.GetString("content")
	final, isStr := c.(string)
	if parts, ok := c.(template.List); ok {
		for i := len(parts) - 1; i >= 0 && !isStr; i-- {
			if pd, ok := parts[i].(*template.Dict); ok {
				if t, ok := pd.GetString("text"); ok {
					final, isStr = t.(string)
				}
			}
		}
	}
	if !isStr {
		return "", errors.New("prompt: continue_final_message: the final message has no text")
	}
	trimmed := strings.TrimSpace(final)
	at := strings.LastIndex(text, trimmed)
	if at < 0 {
		return "", errors.New("prompt: continue_final_message: the final message does not appear in the rendered chat")
	}
	if n := len(strings.TrimLeftFunc(final, unicode.IsSpace)); at+n <= len(text) && text[at:at+n] == final {
		// The template kept the message's spacing (or it has none).
		return text[:at+n], nil
	}
	return text[:at+len(trimmed)], nil
}

// Text prepares a completion prompt: tokenized with the tokenizer's own
// special tokens added, as vLLM does for /v1/completions.
func (p *Preparer) Text(text, cacheSalt string) Prompt {
	return p.finish(text, true, cacheSalt)
}

// IDs prepares a prompt given as token ids: they are only hashed.
func (p *Preparer) IDs(ids []uint32, cacheSalt string) Prompt {
	return Prompt{IDs: ids, Blocks: p.hash(ids, cacheSalt)}
}

// Completion prepares a /v1/completions body: a prompt string tokenized as
// Text (add_special_tokens as the body sets it, default true), or a list of
// token ids taken as they are, hashed with the model's block size and the
// body's cache_salt as the engine hashes them: no tokenizer is needed for
// those (a Preparer without one answers ErrNoTokenizer for text). Of a
// batch of prompts, texts or token lists, only the first is prepared, and
// the Prompt is marked Batch. prompt_embeds are ErrUnsupported; a body vLLM
// would refuse is an error.
func (p *Preparer) Completion(body []byte) (Prompt, error) {
	req, err := openai.ParseCompletion(body)
	if err != nil {
		return Prompt{}, fmt.Errorf("prompt: %w", err)
	}
	var out Prompt
	switch {
	case req.PromptEmbeds:
		return Prompt{}, unsupported("prompt_embeds")
	case req.Prompt.Count == 0 || (req.Prompt.Kind == openai.PromptTokens && len(req.Prompt.Tokens) == 0):
		return Prompt{}, errors.New("prompt: no prompt")
	case req.Prompt.Kind == openai.PromptTokens:
		out = p.IDs(req.Prompt.Tokens, req.CacheSalt)
	case p.Tokenizer == nil && !p.Sim:
		return Prompt{}, ErrNoTokenizer
	default:
		addSpecial := !req.AddSpecialTokens.Set || req.AddSpecialTokens.Value
		out = p.finish(req.Prompt.Text, addSpecial, req.CacheSalt)
	}
	out.Batch = req.Prompt.Count > 1
	return out, nil
}

// Tokenize prepares a /tokenize body as vLLM's ServingTokenization reads
// it: a TokenizeChatRequest (messages) as Chat prepares a chat body, its
// add_generation_prompt, add_special_tokens (default false),
// continue_final_message, tools and chat_template_kwargs the same fields;
// or a TokenizeCompletionRequest, a prompt string tokenized with
// add_special_tokens (default true). Unlike a completion, an empty prompt
// is allowed: it has no tokens but the special ones. A prompt that is not
// a string, and an add_special_tokens that is not a bool, are errors.
func (p *Preparer) Tokenize(body []byte, now time.Time) (Prompt, error) {
	req, err := object(body)
	if err != nil {
		return Prompt{}, err
	}
	if _, ok := req.GetString("messages"); ok {
		return p.Chat(body, now)
	}
	pv, _ := req.GetString("prompt")
	text, ok := pv.(string)
	if !ok {
		return Prompt{}, errors.New("prompt: prompt is not a string")
	}
	addSpecial := true
	if a, ok := req.GetString("add_special_tokens"); ok {
		if addSpecial, ok = a.(bool); !ok {
			return Prompt{}, errors.New("prompt: add_special_tokens is not a bool")
		}
	}
	if p.Tokenizer == nil && !p.Sim {
		return Prompt{}, ErrNoTokenizer
	}
	return p.finish(text, addSpecial, ""), nil
}

// object parses a request body, which must be a JSON object.
func object(body []byte) (*template.Dict, error) {
	v, err := template.ParseJSON(body)
	if err != nil {
		return nil, fmt.Errorf("prompt: %w", err)
	}
	req, ok := v.(*template.Dict)
	if !ok {
		return nil, errors.New("prompt: the body is not a JSON object")
	}
	return req, nil
}

func (p *Preparer) finish(text string, addSpecial bool, salt string) Prompt {
	// Rarely fewer than two bytes a token (three to five is usual):
	// one allocation for most prompts, instead of append's doublings.
	ids := make([]uint32, 0, len(text)/2+16)
	switch {
	case p.Sim:
		ids = token.Sim{}.Encode(ids, text)
	case p.Cache != nil:
		ids = p.Tokenizer.EncodeCached(ids, text, addSpecial, p.Cache)
	default:
		ids = p.Tokenizer.Encode(ids, text, addSpecial)
	}
	return Prompt{Text: text, IDs: ids, Blocks: p.hash(ids, salt)}
}

func (p *Preparer) hash(ids []uint32, salt string) []prefix.Hash {
	var h prefix.Hasher
	bs := p.BlockSize
	if bs <= 0 {
		bs = 16
	}
	return h.Chain(make([]prefix.Hash, 0, len(ids)/bs), prefix.Root(p.Model, "", salt), ids, bs)
}

// simChat prepares a chat body as the simulator's handler does.
func (p *Preparer) simChat(body []byte) (Prompt, error) {
	req, err := openai.ParseChat(body)
	if err != nil {
		return Prompt{}, fmt.Errorf("prompt: %w", err)
	}
	for _, m := range req.Messages {
		if m.NonText {
			return Prompt{}, unsupported("a content part other than text")
		}
	}
	return p.finish(SimChat(req), false, req.CacheSalt), nil
}

// SimChat is the prompt the simulator renders for a chat request: the
// messages that have content, through token.RenderSimChat, the final one
// left open under continue_final_message. The simulator's handler calls it,
// so gateway and simulator cannot disagree.
func SimChat(req *openai.ChatRequest) string {
	msgs := make([]token.Message, 0, len(req.Messages))
	for _, m := range req.Messages {
		if m.NoContent {
			continue
		}
		msgs = append(msgs, token.Message{Role: m.Role, Content: m.Content})
	}
	text := token.RenderSimChat(msgs, req.AddGenerationPrompt && !req.ContinueFinalMessage)
	if req.ContinueFinalMessage && len(msgs) > 0 {
		// The final message is left open so the model continues it.
		text = text[:len(text)-len("<|im_end|>\n")]
	}
	return text
}

// textPartTypes are the content part types vLLM reads as text
// (chat_utils.MM_PARSER_MAP).
func textPart(typ template.Value) bool {
	switch typ {
	case "text", "input_text", "output_text", "refusal", "thinking":
		return true
	}
	return false
}

// normalizeMessage does what vLLM's parse_chat_messages does to a message
// before the template sees it: content parts are read as text (any other
// part is ErrUnsupported) and, in the "string" format, joined with
// newlines, a null content becoming ""; in the "openai" format content
// becomes a list of {"type": "text", "text": ...}, except for a tool
// message whose parts are all text, which is joined. A tool call's
// arguments given as a JSON string are parsed into an object ({} when they
// are not JSON, or null), and an empty tool_calls list is dropped.
func normalizeMessage(m template.Value, openaiFormat bool) (template.Value, error) {
	d, ok := m.(*template.Dict)
	if !ok {
		return nil, errors.New("prompt: a message is not an object")
	}
	role, _ := d.GetString("role")
	c, _ := d.GetString("content")
	var texts []string
	switch x := c.(type) {
	case nil: // null or absent
		texts = []string{}
	case string:
		texts = []string{x}
	case template.List:
		texts = make([]string, 0, len(x))
		for _, part := range x {
			if s, ok := part.(string); ok {
				texts = append(texts, s)
				continue
			}
			pd, ok := part.(*template.Dict)
			if !ok {
				return nil, errors.New("prompt: a content part is not an object")
			}
			typ, _ := pd.GetString("type")
			if !textPart(typ) {
				return nil, unsupported("content part of type %v", typ)
			}
			key := "text"
			if typ == "refusal" || typ == "thinking" {
				key = typ.(string)
			}
			t, _ := pd.GetString(key)
			if s, ok := t.(string); ok {
				texts = append(texts, s)
			}
		}
	default:
		return nil, errors.New("prompt: content is neither a string nor a list")
	}
	if texts != nil {
		if openaiFormat && role != "tool" {
			parts := make(template.List, len(texts))
			for i, s := range texts {
				pd := template.NewDict(2)
				pd.SetString("type", "text")
				pd.SetString("text", s)
				parts[i] = pd
			}
			d.SetString("content", parts)
		} else {
			d.SetString("content", strings.Join(texts, "\n"))
		}
	}
	if role == "assistant" {
		if r, ok := d.GetString("reasoning"); ok && r != nil {
			d.SetString("reasoning_content", r)
		}
	}
	tc, ok := d.GetString("tool_calls")
	if !ok || role != "assistant" {
		return d, nil
	}
	calls, isList := tc.(template.List)
	if isList && len(calls) == 0 {
		nd := template.NewDict(d.Len())
		d.Range(func(k, v template.Value) bool {
			if k != "tool_calls" {
				nd.Set(k, v)
			}
			return true
		})
		return nd, nil
	}
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
		switch args, _ := fd.GetString("arguments"); a := args.(type) {
		case string:
			parsed, err := template.ParseJSON([]byte(a))
			if err != nil {
				parsed = template.NewDict(0)
			}
			fd.SetString("arguments", parsed)
		case *template.Dict, template.List:
		default:
			fd.SetString("arguments", template.NewDict(0))
		}
	}
	return d, nil
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

func stringOr(d *template.Dict, key string) string {
	v, _ := d.GetString(key)
	s, _ := v.(string)
	return s
}
