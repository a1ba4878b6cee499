package workload

import (
	"time"

	"github.com/inferrail/inferrail/model/anthropic"
	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/model/prompt"
	"github.com/inferrail/inferrail/model/token"
)

// Encoder tokenizes requests as the simulator does (sim/handlers.go): a
// chat through token.RenderSimChat with the generation prompt, then
// token.Sim; a completion prompt through token.Sim, or as it is when it
// is token ids (Request.Tokens). It remembers the tokens
// of long messages, since system prompts, tool definitions and conversation
// histories repeat: every rendered message starts with the "<|im_start|>"
// marker, and token.Sim always starts a token at '<', so a chat's tokens are
// its messages' tokens rendered one by one, end to end (TestEncoderExact).
//
// An Encoder is owned by one goroutine.
type Encoder struct {
	memo map[memoKey][]uint32
	gen  []uint32 // "<|im_start|>assistant\n"
}

type memoKey struct{ role, content string }

// Messages shorter than memoMin bytes are encoded each time; the memo
// starts over past memoMax entries.
const (
	memoMin = 256
	memoMax = 1 << 14
)

// NewEncoder returns an Encoder with an empty memo.
func NewEncoder() *Encoder {
	return &Encoder{
		memo: make(map[memoKey][]uint32),
		gen:  token.Sim{}.Encode(nil, token.RenderSimChat(nil, true)),
	}
}

// Encode appends r's prompt token ids to dst.
func (e *Encoder) Encode(dst []uint32, r *Request) []uint32 {
	if r.IsMessages() {
		return encodeMessages(dst, r, false)
	}
	if len(r.Tokens) > 0 {
		return append(dst, r.Tokens...)
	}
	if !r.Chat() {
		return token.Sim{}.Encode(dst, r.Prompt)
	}
	var one [1]token.Message
	for _, m := range r.Messages {
		if len(m.Content) < memoMin {
			one[0] = m
			dst = token.Sim{}.Encode(dst, token.RenderSimChat(one[:], false))
			continue
		}
		k := memoKey{m.Role, m.Content}
		ids, ok := e.memo[k]
		if !ok {
			if len(e.memo) >= memoMax {
				clear(e.memo)
			}
			one[0] = m
			ids = token.Sim{}.Encode(nil, token.RenderSimChat(one[:], false))
			e.memo[k] = ids
		}
		dst = append(dst, ids...)
	}
	return append(dst, e.gen...)
}

// EncodeKeepingHeader is Encode for a router that hashes an Anthropic
// request's text with Claude Code's billing header kept
// (anthropic.Request.KeepBillingHeader); the engines drop it, so for them
// Encode is right. Other requests encode as Encode does.
func (e *Encoder) EncodeKeepingHeader(dst []uint32, r *Request) []uint32 {
	if r.IsMessages() {
		return encodeMessages(dst, r, true)
	}
	return e.Encode(dst, r)
}

// encodeMessages tokenizes an Anthropic request as the simulator's
// /v1/messages handler does (sim/messages.go): converted into vLLM's chat
// request, inline system messages kept in place, then rendered and
// tokenized as its chat path does (prompt.SimChat, token.Sim). Every
// tool_use has an id, so the conversion's clock is never read.
func encodeMessages(dst []uint32, r *Request, keepHeader bool) []uint32 {
	ar, err := anthropic.Parse(AppendMessagesBody(nil, "sim", r, false), false)
	if err != nil {
		panic("BUG: workload: a Messages request vLLM refuses: " + err.Error())
	}
	ar.KeepBillingHeader = keepHeader
	body, err := anthropic.ToChat(ar, anthropic.Preserve, time.Time{})
	if err != nil {
		panic("BUG: workload: a Messages request the simulator cannot convert: " + err.Error())
	}
	req, err := openai.ParseChat(body)
	if err != nil {
		panic("BUG: workload: a converted Messages request the chat parser refuses: " + err.Error())
	}
	return token.Sim{}.Encode(dst, prompt.SimChat(req))
}

// Seed is the seed of the simulator's answer to a prompt (sim.seedOf):
// FNV-1a over its token ids, so the same prompt always gets the same answer,
// as at temperature 0.
func Seed(prompt []uint32) uint64 {
	h := uint64(14695981039346656037)
	for _, t := range prompt {
		h ^= uint64(t)
		h *= 1099511628211
	}
	return h
}

// Answer is the text the simulator generates for a prompt with these token
// ids when asked for n tokens: token.Generate(Seed(prompt), n).
func Answer(prompt []uint32, n int) string { return token.Generate(Seed(prompt), n) }

// AppendOutput appends the ids of the n tokens the simulator generates for
// a prompt with these token ids, as its handler makes Request.Output.
func AppendOutput(dst []uint32, prompt []uint32, n int) []uint32 {
	seed := Seed(prompt)
	var tok token.Sim
	var one [1]uint32
	for i := range n {
		dst = append(dst, tok.Encode(one[:0], token.Piece(seed, i))[0])
	}
	return dst
}
