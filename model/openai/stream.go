package openai

import "strconv"

// StreamConfig is what every chunk of one streamed response repeats. A
// plain value, copied by NewChatStream and NewCompletionStream.
type StreamConfig struct {
	ID          string // response id: ChatID(base) or CompletionID(base)
	Created     int64  // Unix seconds, the same on every chunk
	Model       string // served model name
	Fingerprint string // system_fingerprint; "" is null and never sent
	// IncludeUsage is the first result of StreamOptions.Usage: a usage chunk
	// closes the stream, so the finish chunk does not carry
	// system_fingerprint (the usage chunk does).
	IncludeUsage bool
}

// Stream writes the SSE events of one streamed chat or text completion. It
// renders the per-request prefix once, so writing a content chunk is a few
// appends and allocates nothing. A Stream is immutable after construction
// and safe for concurrent use.
//
// Every Append method appends one complete event, "data: {…}\n\n". Chunks
// follow vLLM's chat_completion_stream_generator / completion_stream_generator
// (chat_completion/serving.py @ 006c49d485f9, completion/serving.py @
// 030ea52effcb), serialized with model_dump_json(exclude_unset=True): only
// fields the server set, in declaration order, without spaces.
//
// Methods that take u *Usage add the continuous usage of
// stream_options.continuous_usage_stats when u is not nil.
type Stream struct {
	chat        bool
	prefix      []byte // data: {"id":…,"object":…,"created":…,"model":…,"choices":[
	fingerprint string
	finalUsage  bool
	index       int // the choice's index
}

// Choice is the writer of choice i of the same stream: a completion of a
// batch of prompts streams each prompt's choice under its index.
func (s *Stream) Choice(i int) *Stream {
	c := *s
	c.index = i
	return &c
}

// NewChatStream returns the writer for a chat.completion.chunk stream.
func NewChatStream(c StreamConfig) *Stream {
	return newStream(c, true, "chat.completion.chunk")
}

// NewCompletionStream returns the writer for a text_completion stream.
func NewCompletionStream(c StreamConfig) *Stream {
	return newStream(c, false, "text_completion")
}

func newStream(c StreamConfig, chat bool, object string) *Stream {
	p := make([]byte, 0, 96+len(c.ID)+len(c.Model))
	p = append(p, `data: {"id":`...)
	p = appendString(p, c.ID)
	p = append(p, `,"object":"`...)
	p = append(p, object...)
	p = append(p, `","created":`...)
	p = strconv.AppendInt(p, c.Created, 10)
	p = append(p, `,"model":`...)
	p = appendString(p, c.Model)
	p = append(p, `,"choices":[`...)
	return &Stream{chat: chat, prefix: p, fingerprint: c.Fingerprint, finalUsage: c.IncludeUsage}
}

// AppendRole appends a chat stream's first chunk, which announces the role
// with empty content and carries prompt_token_ids and prompt_text as null:
//
//	{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}
//
// With continuous usage, u has CompletionTokens 0. Text completion streams
// have no role chunk; AppendRole must not be called on them.
func (s *Stream) AppendRole(dst []byte, role string, u *Usage) []byte {
	if !s.chat {
		panic("BUG: openai: AppendRole on a text completion stream")
	}
	dst = append(dst, s.prefix...)
	dst = append(dst, `{"index":`...)
	dst = strconv.AppendInt(dst, int64(s.index), 10)
	dst = append(dst, `,"delta":{"role":`...)
	dst = appendString(dst, role)
	dst = append(dst, `,"content":""},"logprobs":null,"finish_reason":null}]`...)
	if u != nil {
		dst = append(dst, `,"usage":`...)
		dst = appendContinuousUsage(dst, u)
	}
	return append(dst, ",\"prompt_token_ids\":null,\"prompt_text\":null}\n\n"...)
}

// AppendContent appends a content chunk carrying text: for chat
//
//	{"index":0,"delta":{"content":"…"},"logprobs":null,"finish_reason":null,"token_ids":null}
//
// and for text completions
//
//	{"index":0,"text":"…","logprobs":null,"finish_reason":null,"stop_reason":null,"prompt_token_ids":null,"token_ids":null}
//
// This is the hot path: it allocates nothing once dst has room.
func (s *Stream) AppendContent(dst []byte, text string, u *Usage) []byte {
	dst = s.appendChoiceHead(dst, text)
	if s.chat {
		dst = append(dst, `,"logprobs":null,"finish_reason":null,"token_ids":null}]`...)
	} else {
		dst = append(dst, `,"logprobs":null,"finish_reason":null,"stop_reason":null,"prompt_token_ids":null,"token_ids":null}]`...)
	}
	if u != nil {
		dst = append(dst, `,"usage":`...)
		dst = appendContinuousUsage(dst, u)
	}
	return append(dst, "}\n\n"...)
}

// AppendFinish appends the chunk that ends the choice: the last text (often
// "") with finish_reason and stop_reason. It carries system_fingerprint
// when no usage chunk follows (StreamConfig.IncludeUsage false) and a
// fingerprint is configured.
func (s *Stream) AppendFinish(dst []byte, text string, f Finish, u *Usage) []byte {
	dst = s.appendChoiceHead(dst, text)
	dst = append(dst, `,"logprobs":null,"finish_reason":`...)
	if s.chat {
		dst = appendString(dst, chatFinishReason(f.Reason))
	} else {
		dst = appendNullString(dst, f.Reason)
	}
	dst = append(dst, `,"stop_reason":`...)
	dst = f.Stop.appendTo(dst)
	if s.chat {
		dst = append(dst, `,"token_ids":null}]`...)
	} else {
		dst = append(dst, `,"prompt_token_ids":null,"token_ids":null}]`...)
	}
	if u != nil {
		dst = append(dst, `,"usage":`...)
		dst = appendContinuousUsage(dst, u)
	}
	if !s.finalUsage && s.fingerprint != "" {
		dst = append(dst, `,"system_fingerprint":`...)
		dst = appendString(dst, s.fingerprint)
	}
	return append(dst, "}\n\n"...)
}

// AppendUsage appends the usage chunk sent after the finish chunk when
// StreamOptions.Usage says so: no choices, the final usage, and
// system_fingerprint. vLLM dumps it with exclude_none, so nothing is null
// and prompt_tokens_details is present only when enabled:
//
//	{"id":…,"object":…,"created":…,"model":…,"choices":[],"usage":{"prompt_tokens":…,"total_tokens":…,"completion_tokens":…,"prompt_tokens_details":{"cached_tokens":…}},"system_fingerprint":"…"}
func (s *Stream) AppendUsage(dst []byte, u *Usage) []byte {
	dst = append(dst, s.prefix...)
	dst = append(dst, `],"usage":`...)
	dst = appendStreamUsage(dst, u)
	if s.fingerprint != "" {
		dst = append(dst, `,"system_fingerprint":`...)
		dst = appendString(dst, s.fingerprint)
	}
	return append(dst, "}\n\n"...)
}

func (s *Stream) appendChoiceHead(dst []byte, text string) []byte {
	dst = append(dst, s.prefix...)
	dst = append(dst, `{"index":`...)
	dst = strconv.AppendInt(dst, int64(s.index), 10)
	if s.chat {
		dst = append(dst, `,"delta":{"content":"`...)
		dst = appendEscaped(dst, text)
		return append(dst, `"}`...)
	}
	dst = append(dst, `,"text":"`...)
	dst = appendEscaped(dst, text)
	return append(dst, '"')
}

// AppendDone appends the event that ends every vLLM stream, after the usage
// chunk or an error: "data: [DONE]\n\n".
func AppendDone(dst []byte) []byte {
	return append(dst, "data: [DONE]\n\n"...)
}
