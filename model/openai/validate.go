package openai

import "unicode/utf8"

// This file holds the request models' mode="before" validators. They run on
// the raw dict before any field is type-checked, so they see JSON values
// (Python truthiness, isinstance checks) rather than converted fields, and
// the first one that raises wins. Pydantic runs "before" validators of one
// class last-defined first; each function below lists that order.

// chatValidators runs ChatCompletionRequest's validators
// (vllm/entrypoints/openai/chat_completion/protocol.py @ 002032ee2b18):
// check_system_message_content_type and drop_prompt_token_ids_with_media
// (no errors), check_generation_prompt, check_tool_usage,
// check_structured_outputs_count (not reproduced), check_logprobs,
// validate_stream_options, validate_response_format,
// _normalize_messages_before (no errors), check_cache_salt_support.
func chatValidators(b []byte, f *fields) *Error {
	if truthy(b, f[fContinueFinalMessage]) && truthy(b, f[fAddGenerationPrompt]) {
		return valueError("Cannot set both `continue_final_message` and `add_generation_prompt` to True.", "", "")
	}
	if err := checkToolUsage(b, f); err != nil {
		return err
	}
	if err := checkLogprobsChat(b, f); err != nil {
		return err
	}
	if err := validateStreamOptions(b, f); err != nil {
		return err
	}
	if err := validateResponseFormat(b, f); err != nil {
		return err
	}
	return validateCacheSalt(b, f[fCacheSalt])
}

// completionValidators runs CompletionRequest's validators
// (vllm/entrypoints/openai/completion/protocol.py @ 002032ee2b18):
// validate_prompt_list_length (VLLM_MAX_COMPLETION_PROMPTS; not reproduced,
// Check refuses every batch), validate_prompt_and_prompt_embeds,
// validate_stream_options, check_logprobs, check_structured_outputs_count
// (not reproduced), validate_response_format, normalize_null_max_tokens (no
// errors), check_cache_salt_support.
func completionValidators(b []byte, f *fields) *Error {
	p, e := f[fPrompt], f[fPromptEmbeds]
	promptEmpty := p.kind == kNone || p.kind == kNull || (p.kind == kString && p.end-p.start == 2)
	embedsEmpty := e.kind == kNone || e.kind == kNull || (e.kind == kArray && !truthy(b, e))
	if promptEmpty && embedsEmpty {
		return valueError("Either prompt or prompt_embeds must be provided and non-empty.", "prompt", "")
	}
	if err := validateStreamOptions(b, f); err != nil {
		return err
	}
	if err := checkLogprobsCompletion(b, f); err != nil {
		return err
	}
	if err := validateResponseFormat(b, f); err != nil {
		return err
	}
	return validateCacheSalt(b, f[fCacheSalt])
}

func validateStreamOptions(b []byte, f *fields) *Error {
	if truthy(b, f[fStreamOptions]) && !truthy(b, f[fStream]) {
		return valueError("Stream options can only be defined when `stream=True`.", "stream_options", "")
	}
	return nil
}

// validateResponseFormat: a json_schema response_format needs json_schema.
func validateResponseFormat(b []byte, f *fields) *Error {
	rf := f[fResponseFormat]
	if rf.kind != kObject {
		return nil
	}
	var typ, schema span
	members(b, rf, func(k []byte, v span) {
		switch string(k) {
		case "type":
			typ = v
		case "json_schema":
			schema = v
		}
	})
	if typ.kind == kString && decodeString(b[typ.start:typ.end]) == "json_schema" &&
		(schema.kind == kNone || schema.kind == kNull) {
		return valueError("When response_format type is 'json_schema', the 'json_schema' field must be provided.", "response_format", "")
	}
	return nil
}

// validateCacheSalt is validate_cache_salt
// (vllm/entrypoints/generate/base/protocol.py @ 022e555dbb75, vLLM PR #51444).
func validateCacheSalt(b []byte, s span) *Error {
	if s.kind == kNone || s.kind == kNull {
		return nil
	}
	if s.kind != kString || s.end-s.start == 2 {
		return valueError("Parameter 'cache_salt' must be a non-empty string if provided.", "cache_salt", "")
	}
	salt := decodeString(b[s.start:s.end])
	bad := utf8.RuneCountInString(salt) > 128
	for i := 0; i < len(salt) && !bad; i++ {
		switch salt[i] {
		case '@', '/', '\\', 0:
			bad = true
		}
	}
	if bad {
		return valueError(`Parameter 'cache_salt' must be at most 128 characters and must not contain '@', '/', '\\', or NUL.`, "cache_salt", "")
	}
	return nil
}

// pyNumber is a raw value as the validators' comparisons see it: JSON
// numbers and bools (bool is an int in Python).
func pyNumber(b []byte, s span) (float64, bool) {
	switch s.kind {
	case kBool:
		if b[s.start] == 't' {
			return 1, true
		}
		return 0, true
	case kNumber:
		return numberValue(b[s.start:s.end])
	}
	return 0, false
}

// checkLogprobsCommon is the part of check_logprobs both endpoints share:
// the isinstance check and the prompt_logprobs rules. numeric lists the
// fields that must be numbers, in vLLM's order.
func checkLogprobsCommon(b []byte, f *fields, numeric [2]field, names [2]string) *Error {
	for i, fl := range numeric {
		s := f[fl]
		if s.kind == kNone || s.kind == kNull {
			continue
		}
		if _, ok := pyNumber(b, s); !ok {
			return valueError("`"+names[i]+"` must be an integer.", names[i], pyStr(b, s))
		}
	}
	if s := f[fPromptLogprobs]; s.kind != kNone && s.kind != kNull {
		pl, _ := pyNumber(b, s)
		if truthy(b, f[fStream]) && (pl > 0 || pl == -1) {
			return valueError("`prompt_logprobs` are not available when `stream=True`.", "prompt_logprobs", "")
		}
		if pl < 0 && pl != -1 {
			return valueError("`prompt_logprobs` must be a positive value or -1.", "prompt_logprobs", pyStr(b, s))
		}
	}
	return nil
}

// checkLogprobsChat is ChatCompletionRequest.check_logprobs.
func checkLogprobsChat(b []byte, f *fields) *Error {
	if ids := f[fLogprobTokenIDs]; ids.kind != kNone && ids.kind != kNull {
		if ids.kind != kArray {
			return nil // vLLM returns early and leaves the type error to pydantic
		}
		switch {
		case !truthy(b, ids):
			return valueError("`logprob_token_ids` must not be an empty list.", "logprob_token_ids", "")
		case truthy(b, f[fUseBeamSearch]):
			return valueError("`logprob_token_ids` is not supported with beam search.", "logprob_token_ids", "")
		case !truthy(b, f[fLogprobs]):
			return valueError("when using `logprob_token_ids`, `logprobs` must be set to true.", "logprob_token_ids", "")
		}
	}
	if err := checkLogprobsCommon(b, f, [2]field{fPromptLogprobs, fTopLogprobs}, [2]string{"prompt_logprobs", "top_logprobs"}); err != nil {
		return err
	}
	if s := f[fTopLogprobs]; s.kind != kNone && s.kind != kNull {
		tl, _ := pyNumber(b, s)
		if tl < 0 && tl != -1 {
			return valueError("`top_logprobs` must be a positive value or -1.", "top_logprobs", pyStr(b, s))
		}
		if (tl == -1 || tl > 0) && !truthy(b, f[fLogprobs]) {
			return valueError("when using `top_logprobs`, `logprobs` must be set to true.", "top_logprobs", "")
		}
	}
	return nil
}

// checkLogprobsCompletion is CompletionRequest.check_logprobs.
func checkLogprobsCompletion(b []byte, f *fields) *Error {
	if ids := f[fLogprobTokenIDs]; ids.kind != kNone && ids.kind != kNull {
		if ids.kind != kArray {
			return nil
		}
		mt, isNum := pyNumber(b, f[fMaxTokens])
		switch {
		case !truthy(b, ids):
			return valueError("`logprob_token_ids` must not be an empty list.", "logprob_token_ids", "")
		case truthy(b, f[fUseBeamSearch]):
			return valueError("`logprob_token_ids` is not supported with beam search.", "logprob_token_ids", "")
		case truthy(b, f[fEcho]) && isNum && mt == 0:
			return valueError("`logprob_token_ids` is not supported when `echo=True` and `max_tokens=0` because no output tokens are generated.", "logprob_token_ids", "")
		case f[fLogprobs].kind == kNone || f[fLogprobs].kind == kNull:
			return valueError("when using `logprob_token_ids`, `logprobs` must be set.", "logprob_token_ids", "")
		}
	}
	if err := checkLogprobsCommon(b, f, [2]field{fPromptLogprobs, fLogprobs}, [2]string{"prompt_logprobs", "logprobs"}); err != nil {
		return err
	}
	if s := f[fLogprobs]; s.kind != kNone && s.kind != kNull {
		if lp, _ := pyNumber(b, s); lp < 0 && lp != -1 {
			return valueError("`logprobs` must be a positive value or -1.", "logprobs", pyStr(b, s))
		}
	}
	return nil
}

// checkToolUsage is ChatCompletionRequest.check_tool_usage.
func checkToolUsage(b []byte, f *fields) *Error {
	tools, tc := f[fTools], f[fToolChoice]
	if tools.kind == kArray && !truthy(b, tools) {
		return valueError("`tools` must not be an empty array. Either provide at least one tool or omit the field entirely.", "tools", "")
	}
	if tc.kind == kNone || tc.kind == kNull {
		return nil // absent: "auto" when tools are given, which needs no check
	}
	if tc.kind == kString && decodeString(b[tc.start:tc.end]) == "none" {
		return nil
	}
	if tools.kind == kNone || tools.kind == kNull {
		return valueError("When using `tool_choice`, `tools` must be set.", "tool_choice", "")
	}
	if tc.kind != kObject {
		if tc.kind == kString {
			if v := decodeString(b[tc.start:tc.end]); v == "auto" || v == "required" {
				return nil
			}
		}
		return valueError("Invalid value for `tool_choice`: "+pyStr(b, tc)+`! Only named tools, "none", "auto" or "required" are supported.`, "tool_choice", "")
	}
	const usage = "Correct usage: `{\"type\": \"function\", \"function\": {\"name\": \"my_function\"}}`"
	var fn span
	members(b, tc, func(k []byte, v span) {
		if string(k) == "function" {
			fn = v
		}
	})
	if fn.kind != kObject {
		return valueError("Invalid value for `function`: `"+pyStr(b, fn)+"` in `tool_choice`! "+usage, "tool_choice.function", "")
	}
	var name span
	members(b, fn, func(k []byte, v span) {
		if string(k) == "name" {
			name = v
		}
	})
	if name.kind == kNone {
		return valueError("Expected field `name` in `function` in `tool_choice`! "+usage, "tool_choice.function.name", "")
	}
	if name.kind != kString || name.end-name.start == 2 {
		return valueError("Invalid `name` in `function`: `"+pyStr(b, name)+"` in `tool_choice`! "+usage, "tool_choice.function.name", "")
	}
	want := decodeString(b[name.start:name.end])
	found := false
	if tools.kind == kArray {
		each(b, tools, func(_ int, t span) {
			if t.kind != kObject {
				return
			}
			members(b, t, func(k []byte, v span) {
				if string(k) != "function" || v.kind != kObject {
					return
				}
				members(b, v, func(k []byte, n span) {
					if string(k) == "name" && n.kind == kString && decodeString(b[n.start:n.end]) == want {
						found = true
					}
				})
			})
		})
	}
	if !found {
		return valueError("The tool specified in `tool_choice` does not match any of the specified `tools`", "tool_choice", "")
	}
	return nil
}
