package anthropic

import "strconv"

// Writers of the Messages answers as vLLM serves them
// (vllm/entrypoints/anthropic/serving.py and api_router.py @ a8c3bdb20f5d).
// The fields follow the order of vLLM's pydantic models (protocol.py):
// a response is model_dump(exclude_none=True) written by Starlette's
// JSONResponse, an event model_dump_json(exclude_unset=True) framed as
// "event: NAME\ndata: JSON\n\n". testdata/gen_fixtures.py holds the models.

// Answer is a non-streamed answer of one text block (content may be
// empty: vLLM then sends one empty text block).
type Answer struct {
	ID, Model, Text string
	// StopReason is end_turn, max_tokens, stop_sequence or tool_use;
	// StopSequence the matched stop string of stop_sequence, else "".
	StopReason, StopSequence string
	Usage                    Usage
}

// AppendMessage appends m as vLLM's AnthropicMessagesResponse body.
func AppendMessage(dst []byte, m *Answer) []byte {
	dst = append(dst, `{"id":`...)
	dst = AppendString(dst, m.ID)
	dst = append(dst, `,"type":"message","role":"assistant","content":[{"type":"text","text":`...)
	dst = AppendString(dst, m.Text)
	dst = append(dst, `}],"model":`...)
	dst = AppendString(dst, m.Model)
	dst = append(dst, `,"stop_reason":`...)
	dst = AppendString(dst, m.StopReason)
	if m.StopSequence != "" {
		dst = append(dst, `,"stop_sequence":`...)
		dst = AppendString(dst, m.StopSequence)
	}
	dst = append(dst, `,"usage":`...)
	dst = appendUsage(dst, m.Usage)
	return append(dst, '}')
}

// appendUsage writes AnthropicUsage as _build_anthropic_usage fills it:
// input and output always, the cache fields when they are known.
func appendUsage(dst []byte, u Usage) []byte {
	dst = append(dst, `{"input_tokens":`...)
	dst = strconv.AppendInt(dst, int64(u.Input), 10)
	dst = append(dst, `,"output_tokens":`...)
	dst = strconv.AppendInt(dst, int64(u.Output), 10)
	if u.HasCacheRead {
		dst = append(dst, `,"cache_read_input_tokens":`...)
		dst = strconv.AppendInt(dst, int64(u.CacheRead), 10)
	}
	return append(dst, '}')
}

// appendEvent opens an event of type name: its event line, its data's
// type member.
func appendEvent(dst []byte, name string) []byte {
	dst = append(dst, "event: "...)
	dst = append(dst, name...)
	dst = append(dst, "\ndata: {\"type\":\""...)
	dst = append(dst, name...)
	return append(dst, '"')
}

func closeEvent(dst []byte) []byte { return append(dst, "}\n\n"...) }

// AppendMessageStart appends message_start: the message with no content
// and no stop reason, and the usage of the first chat chunk.
func AppendMessageStart(dst []byte, id, model string, u Usage) []byte {
	dst = appendEvent(dst, "message_start")
	dst = append(dst, `,"message":{"id":`...)
	dst = AppendString(dst, id)
	dst = append(dst, `,"type":"message","role":"assistant","content":[],"model":`...)
	dst = AppendString(dst, model)
	dst = append(dst, `,"stop_reason":null,"stop_sequence":null,"usage":`...)
	dst = appendUsage(dst, u)
	return closeEvent(append(dst, '}'))
}

// AppendTextStart appends content_block_start of an empty text block.
func AppendTextStart(dst []byte, index int) []byte {
	dst = appendEvent(dst, "content_block_start")
	dst = append(dst, `,"content_block":{"type":"text","text":""}`...)
	return closeEvent(appendIndex(dst, index))
}

// AppendTextDelta appends content_block_delta of text.
func AppendTextDelta(dst []byte, index int, text string) []byte {
	dst = appendEvent(dst, "content_block_delta")
	dst = append(dst, `,"delta":{"type":"text_delta","text":`...)
	dst = AppendString(dst, text)
	dst = append(dst, '}')
	return closeEvent(appendIndex(dst, index))
}

// AppendBlockStop appends content_block_stop.
func AppendBlockStop(dst []byte, index int) []byte {
	return closeEvent(appendIndex(appendEvent(dst, "content_block_stop"), index))
}

func appendIndex(dst []byte, index int) []byte {
	dst = append(dst, `,"index":`...)
	return strconv.AppendInt(dst, int64(index), 10)
}

// AppendMessageDelta appends message_delta: the stop reason (and stop
// sequence, null unless it is a matched stop string) and the final usage.
func AppendMessageDelta(dst []byte, stopReason, stopSequence string, u Usage) []byte {
	dst = appendEvent(dst, "message_delta")
	dst = append(dst, `,"delta":{"stop_reason":`...)
	dst = AppendString(dst, stopReason)
	dst = append(dst, `,"stop_sequence":`...)
	if stopSequence == "" {
		dst = append(dst, "null"...)
	} else {
		dst = AppendString(dst, stopSequence)
	}
	dst = append(dst, `},"usage":`...)
	dst = appendUsage(dst, u)
	return closeEvent(dst)
}

// AppendMessageStop appends message_stop, the last event.
func AppendMessageStop(dst []byte) []byte {
	return closeEvent(appendEvent(dst, "message_stop"))
}

// AppendCountTokens appends vLLM's count_tokens answer
// (AnthropicCountTokensResponse): the prompt's tokens, and the same
// number as context_management's original_input_tokens.
func AppendCountTokens(dst []byte, n int) []byte {
	dst = append(dst, `{"input_tokens":`...)
	dst = strconv.AppendInt(dst, int64(n), 10)
	dst = append(dst, `,"context_management":{"original_input_tokens":`...)
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, "}}"...)
}
