package openai

import "strconv"

// Usage is a request's token accounting (vLLM's UsageInfo). A plain value;
// appenders only read it.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	// CachedTokens is the prompt tokens served from the prefix cache at
	// first scheduling (RequestOutput.num_cached_tokens).
	CachedTokens int
	// Details is the server flag --enable-prompt-tokens-details: when set,
	// usage carries prompt_tokens_details with cached_tokens (0 included).
	Details bool
}

// appendUsage appends UsageInfo.model_dump(): every field, in declaration
// order (prompt_tokens, total_tokens, completion_tokens,
// prompt_tokens_details), null details when disabled.
//
// PromptTokenUsageInfo is dumped with its multimodal_tokens field as null, as
// a v0.23.1 capture shows ({"cached_tokens":0,"multimodal_tokens":null},
// vllm.md §5.4). Newer sources add created_cache_tokens and
// completion_tokens_details (vLLM PR #45802); the v0.26.0 chat capture has
// neither on usage, so they are not emitted.
func appendUsage(dst []byte, u *Usage) []byte {
	dst = appendUsageCounts(dst, u)
	if u.Details {
		dst = append(dst, `,"prompt_tokens_details":{"cached_tokens":`...)
		dst = strconv.AppendInt(dst, int64(u.CachedTokens), 10)
		dst = append(dst, `,"multimodal_tokens":null}}`...)
		return dst
	}
	return append(dst, `,"prompt_tokens_details":null}`...)
}

// appendUsageCounts appends {"prompt_tokens":…,"total_tokens":…,
// "completion_tokens":… without the closing brace.
func appendUsageCounts(dst []byte, u *Usage) []byte {
	dst = append(dst, `{"prompt_tokens":`...)
	dst = strconv.AppendInt(dst, int64(u.PromptTokens), 10)
	dst = append(dst, `,"total_tokens":`...)
	dst = strconv.AppendInt(dst, int64(u.PromptTokens+u.CompletionTokens), 10)
	dst = append(dst, `,"completion_tokens":`...)
	return strconv.AppendInt(dst, int64(u.CompletionTokens), 10)
}

// appendStreamUsage appends usage as the final usage chunk carries it
// (model_dump_json(exclude_unset=True, exclude_none=True)): no nulls, so
// prompt_tokens_details appears only when enabled, with cached_tokens alone.
func appendStreamUsage(dst []byte, u *Usage) []byte {
	dst = appendUsageCounts(dst, u)
	if u.Details {
		dst = append(dst, `,"prompt_tokens_details":{"cached_tokens":`...)
		dst = strconv.AppendInt(dst, int64(u.CachedTokens), 10)
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// appendContinuousUsage appends the usage vLLM puts on every chunk under
// stream_options.continuous_usage_stats: UsageInfo(prompt_tokens,
// completion_tokens, total_tokens) dumped with exclude_unset, so just the
// three counts (no details, even when enabled).
func appendContinuousUsage(dst []byte, u *Usage) []byte {
	dst = appendUsageCounts(dst, u)
	return append(dst, '}')
}

// StopReason is vLLM's stop_reason: null (EOS, length, abort), the stop
// string that ended the text, or the stop token id. The zero value is null.
type StopReason struct {
	kind uint8 // 0 null, 1 string, 2 token id
	str  string
	id   int64
}

// StopString is a stop_reason naming the stop string that matched.
func StopString(s string) StopReason { return StopReason{kind: 1, str: s} }

// StopToken is a stop_reason naming the stop token id that matched.
func StopToken(id int64) StopReason { return StopReason{kind: 2, id: id} }

func (s StopReason) appendTo(dst []byte) []byte {
	switch s.kind {
	case 1:
		return appendString(dst, s.str)
	case 2:
		return strconv.AppendInt(dst, s.id, 10)
	}
	return append(dst, "null"...)
}

// Finish is how a choice ended: finish_reason ("stop", "length", "abort",
// …) and stop_reason. An empty Reason is "stop" in chat answers, as vLLM's
// chat serving defaults it, and null in text completions.
type Finish struct {
	Reason string
	Stop   StopReason
}

func chatFinishReason(r string) string {
	if r == "" {
		return "stop"
	}
	return r
}

// ChatCompletion is a non-streaming chat answer with one choice. A plain
// value; AppendChatCompletion only reads it.
type ChatCompletion struct {
	ID          string // response id, "chatcmpl-" + base request id (ChatID)
	Created     int64  // Unix seconds when the request was handled
	Model       string // served model name
	Role        string // message role, see ChatRequest.ResponseRole
	Content     string // generated text
	Finish      Finish
	Fingerprint string // system_fingerprint; "" is null (--fingerprint-mode none)
	Usage       Usage
}

// AppendChatCompletion appends a ChatCompletionResponse as vLLM serves it:
// JSONResponse(model_dump()) with the field set of the v0.26.0 capture
// (vllm.md §5.1; chat_completion/protocol.py @ 002032ee2b18). Every optional
// field is null, and message.tool_calls is left out when empty by
// ChatMessage's serializer.
func AppendChatCompletion(dst []byte, c *ChatCompletion) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendString(dst, c.ID)
	dst = append(dst, `,"object":"chat.completion","created":`...)
	dst = strconv.AppendInt(dst, c.Created, 10)
	dst = append(dst, `,"model":`...)
	dst = appendString(dst, c.Model)
	dst = append(dst, `,"choices":[{"index":0,"message":{"role":`...)
	dst = appendString(dst, c.Role)
	dst = append(dst, `,"content":`...)
	dst = appendString(dst, c.Content)
	dst = append(dst, `,"refusal":null,"annotations":null,"audio":null,"function_call":null,"reasoning":null},"logprobs":null,"finish_reason":`...)
	dst = appendString(dst, chatFinishReason(c.Finish.Reason))
	dst = append(dst, `,"stop_reason":`...)
	dst = c.Finish.Stop.appendTo(dst)
	dst = append(dst, `,"token_ids":null,"routed_experts":null}],"service_tier":null,"system_fingerprint":`...)
	dst = appendNullString(dst, c.Fingerprint)
	dst = append(dst, `,"usage":`...)
	dst = appendUsage(dst, &c.Usage)
	return append(dst, `,"prompt_logprobs":null,"prompt_token_ids":null,"prompt_text":null,"kv_transfer_params":null,"ec_transfer_params":null,"metrics":null}`...)
}

// Completion is a non-streaming text completion with one choice. A plain
// value; AppendCompletion only reads it.
type Completion struct {
	ID          string // "cmpl-" + base request id (CompletionID)
	Created     int64
	Model       string
	Text        string
	Finish      Finish
	Fingerprint string
	Usage       Usage
	// Choices, when set, are the choices of a batch of prompts, in the
	// prompts' order (each index its prompt's), in place of Text and
	// Finish.
	Choices []CompletionChoice
}

// CompletionChoice is one choice of a Completion.
type CompletionChoice struct {
	Text   string
	Finish Finish
}

// AppendCompletion appends a CompletionResponse as vLLM serves it:
// JSONResponse(model_dump()) with the fields of completion/protocol.py @
// 002032ee2b18 (choice: index, text, logprobs, finish_reason, stop_reason,
// token_ids, prompt_logprobs, prompt_token_ids, routed_experts; response:
// id, object, created, model, choices, service_tier, system_fingerprint,
// usage, kv_transfer_params, ec_transfer_params, metrics). No capture
// confirms this shape; routed_experts, ec_transfer_params and metrics are
// inferred from the chat response of the same source, which the v0.26.0
// capture matches.
func AppendCompletion(dst []byte, c *Completion) []byte {
	dst = append(dst, `{"id":`...)
	dst = appendString(dst, c.ID)
	dst = append(dst, `,"object":"text_completion","created":`...)
	dst = strconv.AppendInt(dst, c.Created, 10)
	dst = append(dst, `,"model":`...)
	dst = appendString(dst, c.Model)
	dst = append(dst, `,"choices":[`...)
	choices := c.Choices
	if choices == nil {
		choices = []CompletionChoice{{Text: c.Text, Finish: c.Finish}}
	}
	for i, ch := range choices {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = append(dst, `{"index":`...)
		dst = strconv.AppendInt(dst, int64(i), 10)
		dst = append(dst, `,"text":`...)
		dst = appendString(dst, ch.Text)
		dst = append(dst, `,"logprobs":null,"finish_reason":`...)
		dst = appendNullString(dst, ch.Finish.Reason)
		dst = append(dst, `,"stop_reason":`...)
		dst = ch.Finish.Stop.appendTo(dst)
		dst = append(dst, `,"token_ids":null,"prompt_logprobs":null,"prompt_token_ids":null,"routed_experts":null}`...)
	}
	dst = append(dst, `],"service_tier":null,"system_fingerprint":`...)
	dst = appendNullString(dst, c.Fingerprint)
	dst = append(dst, `,"usage":`...)
	dst = appendUsage(dst, &c.Usage)
	return append(dst, `,"kv_transfer_params":null,"ec_transfer_params":null,"metrics":null}`...)
}

// AppendTokenize appends vLLM's /tokenize answer for ids on a model of
// maxModelLen tokens, without token strings: TokenizeResponse dumped as
// vLLM's JSONResponse dumps it, compact, in field order.
//
//	{"count":3,"max_model_len":4096,"tokens":[1,2,3],"token_strs":null}
func AppendTokenize(dst []byte, ids []uint32, maxModelLen int) []byte {
	dst = append(dst, `{"count":`...)
	dst = strconv.AppendInt(dst, int64(len(ids)), 10)
	dst = append(dst, `,"max_model_len":`...)
	dst = strconv.AppendInt(dst, int64(maxModelLen), 10)
	dst = append(dst, `,"tokens":[`...)
	for i, id := range ids {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = strconv.AppendUint(dst, uint64(id), 10)
	}
	return append(dst, `],"token_strs":null}`...)
}
