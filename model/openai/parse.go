package openai

import (
	"math"
	"strconv"
	"unicode/utf8"
)

// field names a top-level request field this package reads.
type field uint8

const (
	fUnknown field = iota
	fModel
	fMessages
	fPrompt
	fPromptEmbeds
	fMaxTokens
	fMaxCompletionTokens
	fStream
	fStreamOptions
	fN
	fBestOf
	fLogprobs
	fTopLogprobs
	fLogprobTokenIDs
	fPromptLogprobs
	fEcho
	fAddGenerationPrompt
	fContinueFinalMessage
	fCacheSalt
	fIgnoreEOS
	fUser
	fRequestID
	fTemperature
	fTopP
	fTopK
	fMinP
	fFrequencyPenalty
	fPresencePenalty
	fRepetitionPenalty
	fLengthPenalty
	fSeed
	fStop
	fStopTokenIDs
	fMinTokens
	fIncludeStopStr
	fSkipSpecialTokens
	fSpacesBetweenSpecialTokens
	fLogitBias
	fResponseFormat
	fTools
	fToolChoice
	fParallelToolCalls
	fUseBeamSearch
	fAddSpecialTokens
	fChatTemplate
	fChatTemplateKwargs
	fPriority
	fReturnTokenIDs
	fIncludeReasoning
	fSuffix
	fTokens
	numFields
)

// lookupField maps a key to its field. The switch on string(key) does not
// allocate.
func lookupField(key []byte) field {
	switch string(key) {
	case "model":
		return fModel
	case "messages":
		return fMessages
	case "prompt":
		return fPrompt
	case "prompt_embeds":
		return fPromptEmbeds
	case "max_tokens":
		return fMaxTokens
	case "max_completion_tokens":
		return fMaxCompletionTokens
	case "stream":
		return fStream
	case "stream_options":
		return fStreamOptions
	case "n":
		return fN
	case "best_of":
		return fBestOf
	case "logprobs":
		return fLogprobs
	case "top_logprobs":
		return fTopLogprobs
	case "logprob_token_ids":
		return fLogprobTokenIDs
	case "prompt_logprobs":
		return fPromptLogprobs
	case "echo":
		return fEcho
	case "add_generation_prompt":
		return fAddGenerationPrompt
	case "continue_final_message":
		return fContinueFinalMessage
	case "cache_salt":
		return fCacheSalt
	case "ignore_eos":
		return fIgnoreEOS
	case "user":
		return fUser
	case "request_id":
		return fRequestID
	case "temperature":
		return fTemperature
	case "top_p":
		return fTopP
	case "top_k":
		return fTopK
	case "min_p":
		return fMinP
	case "frequency_penalty":
		return fFrequencyPenalty
	case "presence_penalty":
		return fPresencePenalty
	case "repetition_penalty":
		return fRepetitionPenalty
	case "length_penalty":
		return fLengthPenalty
	case "seed":
		return fSeed
	case "stop":
		return fStop
	case "stop_token_ids":
		return fStopTokenIDs
	case "min_tokens":
		return fMinTokens
	case "include_stop_str_in_output":
		return fIncludeStopStr
	case "skip_special_tokens":
		return fSkipSpecialTokens
	case "spaces_between_special_tokens":
		return fSpacesBetweenSpecialTokens
	case "logit_bias":
		return fLogitBias
	case "response_format":
		return fResponseFormat
	case "tools":
		return fTools
	case "tool_choice":
		return fToolChoice
	case "parallel_tool_calls":
		return fParallelToolCalls
	case "use_beam_search":
		return fUseBeamSearch
	case "add_special_tokens":
		return fAddSpecialTokens
	case "chat_template":
		return fChatTemplate
	case "chat_template_kwargs":
		return fChatTemplateKwargs
	case "priority":
		return fPriority
	case "return_token_ids":
		return fReturnTokenIDs
	case "include_reasoning":
		return fIncludeReasoning
	case "suffix":
		return fSuffix
	case "tokens":
		return fTokens
	}
	return fUnknown
}

// fields holds the last occurrence of each known top-level field (Python's
// dict keeps the last duplicate key).
type fields [numFields]span

// scan validates body as JSON the way json.loads does and records the known
// top-level fields. Errors are what FastAPI returns before pydantic runs.
func scan(body []byte, f *fields) (b []byte, err *Error) {
	// json.loads(bytes) decodes as UTF-8 first, skipping a BOM
	// (json.detect_encoding → "utf-8-sig"); a decode failure is not a
	// JSONDecodeError, so FastAPI answers with its generic HTTPException.
	if len(body) >= 3 && body[0] == 0xEF && body[1] == 0xBB && body[2] == 0xBF {
		body = body[3:]
	}
	if !utf8.Valid(body) {
		return nil, bodyParseError()
	}
	r := reader{b: body}
	r.ws()
	if r.i >= len(body) {
		if len(body) == 0 {
			// FastAPI reads an empty body as "no body": the required
			// request model is missing.
			return nil, validationError("body", msgRequired)
		}
		r.fail("Expecting value")
	}
	var top span
	if r.err == nil {
		if body[r.i] == '{' {
			start := r.i
			r.object(func(key, val span) {
				if raw, ok := rawKey(body, key); ok {
					if fl := lookupField(raw); fl != fUnknown {
						f[fl] = val
					}
					return
				}
				if fl := lookupField([]byte(decodeString(body[key.start:key.end]))); fl != fUnknown {
					f[fl] = val
				}
			})
			top = span{start, r.i, kObject}
		} else {
			top = r.value()
		}
	}
	if r.err == nil {
		r.ws()
		if r.i < len(body) {
			r.fail("Extra data")
		}
	}
	if r.err != nil {
		if r.deep {
			return nil, bodyParseError()
		}
		pos := utf8.RuneCount(body[:r.err.off]) // Python reports a character index
		return nil, validationError("body."+strconv.Itoa(pos), "JSON decode error: "+r.err.msg)
	}
	switch top.kind {
	case kObject:
		return body, nil
	case kNull:
		return nil, validationError("body", msgRequired)
	}
	return nil, validationError("body", "Input should be a valid dictionary or object to extract fields from")
}

// ftype is how a field is type-checked.
type ftype uint8

const (
	tBool ftype = iota
	tInt
	tFloat
	tStr
	tStop          // str | list[str] | None
	tIntList       // list[int] | None
	tFloatDict     // dict[str, float] | None
	tDict          // dict[str, Any] | None
	tModel         // a nested pydantic model (response_format): an object
	tList          // list[...] | None, elements unchecked
	tStreamOptions // StreamOptions | None
	tToolChoice    // "none" | "auto" | "required" | named | None
	tCacheSalt     // str | None, 1..1024 characters
	tMessages      // the chat messages (required)
	tPrompt        // the completion prompt union
	tPromptEmbeds  // bytes | list[bytes] | None
)

// spec is one field of a request model, in declaration order: pydantic
// reports field errors in that order, and vLLM's handler takes the first
// one's location as param.
type spec struct {
	f        field
	loc      string // "body.<name>", as vLLM's handler reports it
	t        ftype
	nullable bool
}

// chatSpecs is ChatCompletionRequest's type-checked fields
// (chat_completion/protocol.py @ 002032ee2b18), in declaration order.
// best_of is not a vLLM chat field; it is checked so Check can refuse > 1.
var chatSpecs = [...]spec{
	{fMessages, "body.messages", tMessages, false},
	{fModel, "body.model", tStr, true},
	{fFrequencyPenalty, "body.frequency_penalty", tFloat, true},
	{fLogitBias, "body.logit_bias", tFloatDict, true},
	{fLogprobs, "body.logprobs", tBool, true},
	{fTopLogprobs, "body.top_logprobs", tInt, true},
	{fMaxTokens, "body.max_tokens", tInt, true},
	{fMaxCompletionTokens, "body.max_completion_tokens", tInt, true},
	{fN, "body.n", tInt, true},
	{fPresencePenalty, "body.presence_penalty", tFloat, true},
	{fResponseFormat, "body.response_format", tModel, true},
	{fSeed, "body.seed", tInt, true},
	{fStop, "body.stop", tStop, true},
	{fStream, "body.stream", tBool, true},
	{fStreamOptions, "body.stream_options", tStreamOptions, true},
	{fTemperature, "body.temperature", tFloat, true},
	{fTopP, "body.top_p", tFloat, true},
	{fTools, "body.tools", tList, true},
	{fToolChoice, "body.tool_choice", tToolChoice, true},
	{fIncludeReasoning, "body.include_reasoning", tBool, false},
	{fParallelToolCalls, "body.parallel_tool_calls", tBool, true},
	{fUser, "body.user", tStr, true},
	{fUseBeamSearch, "body.use_beam_search", tBool, false},
	{fTopK, "body.top_k", tInt, true},
	{fMinP, "body.min_p", tFloat, true},
	{fRepetitionPenalty, "body.repetition_penalty", tFloat, true},
	{fLengthPenalty, "body.length_penalty", tFloat, false},
	{fStopTokenIDs, "body.stop_token_ids", tIntList, true},
	{fIncludeStopStr, "body.include_stop_str_in_output", tBool, false},
	{fIgnoreEOS, "body.ignore_eos", tBool, false},
	{fMinTokens, "body.min_tokens", tInt, false},
	{fSkipSpecialTokens, "body.skip_special_tokens", tBool, false},
	{fSpacesBetweenSpecialTokens, "body.spaces_between_special_tokens", tBool, false},
	{fPromptLogprobs, "body.prompt_logprobs", tInt, true},
	{fLogprobTokenIDs, "body.logprob_token_ids", tIntList, true},
	{fEcho, "body.echo", tBool, false},
	{fAddGenerationPrompt, "body.add_generation_prompt", tBool, false},
	{fContinueFinalMessage, "body.continue_final_message", tBool, false},
	{fAddSpecialTokens, "body.add_special_tokens", tBool, false},
	{fChatTemplate, "body.chat_template", tStr, true},
	{fChatTemplateKwargs, "body.chat_template_kwargs", tDict, true},
	{fPriority, "body.priority", tInt, false},
	{fRequestID, "body.request_id", tStr, false},
	{fReturnTokenIDs, "body.return_token_ids", tBool, true},
	{fCacheSalt, "body.cache_salt", tCacheSalt, true},
	{fBestOf, "body.best_of", tInt, true},
}

// completionSpecs is CompletionRequest's type-checked fields
// (completion/protocol.py @ 002032ee2b18), in declaration order; best_of
// (dropped from newer vLLM) is checked so Check can refuse > 1.
var completionSpecs = [...]spec{
	{fModel, "body.model", tStr, true},
	{fPrompt, "body.prompt", tPrompt, true},
	{fEcho, "body.echo", tBool, true},
	{fFrequencyPenalty, "body.frequency_penalty", tFloat, true},
	{fLogitBias, "body.logit_bias", tFloatDict, true},
	{fLogprobs, "body.logprobs", tInt, true},
	{fMaxTokens, "body.max_tokens", tInt, true}, // null is the default 16 (normalize_null_max_tokens)
	{fN, "body.n", tInt, false},
	{fPresencePenalty, "body.presence_penalty", tFloat, true},
	{fSeed, "body.seed", tInt, true},
	{fStop, "body.stop", tStop, true},
	{fStream, "body.stream", tBool, true},
	{fStreamOptions, "body.stream_options", tStreamOptions, true},
	{fSuffix, "body.suffix", tStr, true},
	{fTemperature, "body.temperature", tFloat, true},
	{fTopP, "body.top_p", tFloat, true},
	{fUser, "body.user", tStr, true},
	{fUseBeamSearch, "body.use_beam_search", tBool, false},
	{fTopK, "body.top_k", tInt, true},
	{fMinP, "body.min_p", tFloat, true},
	{fRepetitionPenalty, "body.repetition_penalty", tFloat, true},
	{fLengthPenalty, "body.length_penalty", tFloat, false},
	{fStopTokenIDs, "body.stop_token_ids", tIntList, true},
	{fIncludeStopStr, "body.include_stop_str_in_output", tBool, false},
	{fIgnoreEOS, "body.ignore_eos", tBool, false},
	{fMinTokens, "body.min_tokens", tInt, false},
	{fSkipSpecialTokens, "body.skip_special_tokens", tBool, false},
	{fSpacesBetweenSpecialTokens, "body.spaces_between_special_tokens", tBool, false},
	{fPromptLogprobs, "body.prompt_logprobs", tInt, true},
	{fLogprobTokenIDs, "body.logprob_token_ids", tIntList, true},
	{fPromptEmbeds, "body.prompt_embeds", tPromptEmbeds, true},
	{fAddSpecialTokens, "body.add_special_tokens", tBool, false},
	{fResponseFormat, "body.response_format", tModel, true},
	{fPriority, "body.priority", tInt, false},
	{fRequestID, "body.request_id", tStr, false},
	{fReturnTokenIDs, "body.return_token_ids", tBool, true},
	{fCacheSalt, "body.cache_salt", tCacheSalt, true},
	{fBestOf, "body.best_of", tInt, true},
}

// values holds the converted fields of one body.
type values struct {
	set      [numFields]bool // a non-null value converted without error
	b        [numFields]bool
	i        [numFields]int64
	f        [numFields]float64
	s        [numFields]string
	stop     []string
	messages []Message
	prompt   Prompt
	opts     StreamOptions
	embeds   bool
}

// decode type-checks every field of specs in order.
func (d *decoder) decode(f *fields, specs []spec, v *values) {
	for _, sp := range specs {
		s := f[sp.f]
		loc := sp.loc
		ok := false
		switch sp.t {
		case tBool:
			v.b[sp.f], ok = d.boolean(loc, s, sp.nullable)
		case tInt:
			v.i[sp.f], ok = d.integer(loc, s, sp.nullable)
		case tFloat:
			v.f[sp.f], ok = d.float(loc, s, sp.nullable)
		case tStr:
			v.s[sp.f], ok = d.str(loc, s, sp.nullable)
		case tStop:
			v.stop = d.stop(loc, s)
		case tIntList:
			d.intList(loc, s)
		case tFloatDict:
			if d.object(loc, s, true, msgDict) {
				members(d.b, s, func(k []byte, e span) { d.float(loc+"."+string(k), e, false) })
			}
		case tDict:
			d.object(loc, s, true, msgDict)
		case tModel:
			d.object(loc, s, true, "Input should be a valid dictionary or object to extract fields from")
		case tList:
			d.list(loc, s, true)
		case tStreamOptions:
			v.opts = d.streamOptions(s)
		case tToolChoice:
			d.toolChoice(s)
		case tCacheSalt:
			v.s[sp.f], ok = d.cacheSalt(s)
		case tMessages:
			if s.kind == kNone {
				d.fail(loc, msgRequired)
			} else if d.list(loc, s, false) {
				v.messages = d.messages(s)
			}
		case tPrompt:
			v.prompt = d.prompt(s)
		case tPromptEmbeds:
			switch s.kind {
			case kNone, kNull:
			case kString:
				v.embeds = true
			case kArray:
				v.embeds = true
				each(d.b, s, func(i int, e span) { d.str(loc+"."+strconv.Itoa(i), e, false) })
			default:
				d.fail(loc, "Input should be a valid bytes")
			}
		}
		v.set[sp.f] = ok
	}
}

// ParseChat parses and validates a /v1/chat/completions body as vLLM's
// ChatCompletionRequest does. Every error is an *Error with status 400.
//
// It runs the model's "before" validators in the order pydantic runs them
// (the last one defined in protocol.py first), then type-checks the fields
// in declaration order. Features the simulator lacks are refused later, by
// Check.
func ParseChat(body []byte) (*ChatRequest, error) {
	var f fields
	b, err := scan(body, &f)
	if err != nil {
		return nil, err
	}
	if err := chatValidators(b, &f); err != nil {
		return nil, err
	}
	d := decoder{b: b}
	var v values
	d.decode(&f, chatSpecs[:], &v)
	if len(d.errs) > 0 {
		return nil, validationErrors(d.errs, "")
	}
	r := &ChatRequest{
		Model:                v.s[fModel],
		Messages:             v.messages,
		MaxTokens:            Opt[int64]{v.i[fMaxTokens], v.set[fMaxTokens]},
		MaxCompletionTokens:  Opt[int64]{v.i[fMaxCompletionTokens], v.set[fMaxCompletionTokens]},
		Stream:               v.b[fStream],
		StreamOptions:        v.opts,
		N:                    1,
		BestOf:               Opt[int64]{v.i[fBestOf], v.set[fBestOf]},
		Logprobs:             v.b[fLogprobs],
		TopLogprobs:          v.i[fTopLogprobs],
		Echo:                 v.b[fEcho],
		AddGenerationPrompt:  true,
		ContinueFinalMessage: v.b[fContinueFinalMessage],
		CacheSalt:            v.s[fCacheSalt],
		IgnoreEOS:            v.b[fIgnoreEOS],
		User:                 v.s[fUser],
		RequestID:            Opt[string]{v.s[fRequestID], v.set[fRequestID]},
		Temperature:          Opt[float64]{v.f[fTemperature], v.set[fTemperature]},
		TopP:                 Opt[float64]{v.f[fTopP], v.set[fTopP]},
		TopK:                 Opt[int64]{v.i[fTopK], v.set[fTopK]},
		Seed:                 Opt[int64]{v.i[fSeed], v.set[fSeed]},
		Stop:                 v.stop,
		MinTokens:            v.i[fMinTokens],
		Priority:             v.i[fPriority],
	}
	if v.set[fN] {
		r.N = v.i[fN]
	}
	if v.set[fAddGenerationPrompt] {
		r.AddGenerationPrompt = v.b[fAddGenerationPrompt]
	}
	return r, nil
}

// ParseCompletion parses and validates a /v1/completions body as vLLM's
// CompletionRequest does. Every error is an *Error with status 400.
func ParseCompletion(body []byte) (*CompletionRequest, error) {
	var f fields
	b, err := scan(body, &f)
	if err != nil {
		return nil, err
	}
	if err := completionValidators(b, &f); err != nil {
		return nil, err
	}
	d := decoder{b: b}
	var v values
	d.decode(&f, completionSpecs[:], &v)
	if len(d.errs) > 0 {
		return nil, validationErrors(d.errs, "")
	}
	r := &CompletionRequest{
		Model:            v.s[fModel],
		Prompt:           v.prompt,
		MaxTokens:        16,
		Stream:           v.b[fStream],
		StreamOptions:    v.opts,
		N:                1,
		BestOf:           Opt[int64]{v.i[fBestOf], v.set[fBestOf]},
		Logprobs:         Opt[int64]{v.i[fLogprobs], v.set[fLogprobs]},
		Echo:             v.b[fEcho],
		PromptEmbeds:     v.embeds,
		AddSpecialTokens: Opt[bool]{v.b[fAddSpecialTokens], v.set[fAddSpecialTokens]},
		CacheSalt:        v.s[fCacheSalt],
		IgnoreEOS:        v.b[fIgnoreEOS],
		User:             v.s[fUser],
		Suffix:           v.s[fSuffix],
		RequestID:        Opt[string]{v.s[fRequestID], v.set[fRequestID]},
		Temperature:      Opt[float64]{v.f[fTemperature], v.set[fTemperature]},
		TopP:             Opt[float64]{v.f[fTopP], v.set[fTopP]},
		TopK:             Opt[int64]{v.i[fTopK], v.set[fTopK]},
		Seed:             Opt[int64]{v.i[fSeed], v.set[fSeed]},
		Stop:             v.stop,
		MinTokens:        v.i[fMinTokens],
		Priority:         v.i[fPriority],
	}
	if v.set[fMaxTokens] {
		r.MaxTokens = v.i[fMaxTokens]
	}
	if v.set[fN] {
		r.N = v.i[fN]
	}
	return r, nil
}

// streamOptions decodes stream_options (StreamOptions, extra fields allowed).
func (d *decoder) streamOptions(s span) StreamOptions {
	var o StreamOptions
	if !d.object("body.stream_options", s, true, "Input should be a valid dictionary or instance of StreamOptions") {
		return o
	}
	o.Set = true
	var iu, cu span
	members(d.b, s, func(k []byte, v span) {
		switch string(k) {
		case "include_usage":
			iu = v
		case "continuous_usage_stats":
			cu = v
		}
	})
	o.IncludeUsage, _ = d.boolean("body.stream_options.include_usage", iu, true)
	o.ContinuousUsageStats, _ = d.boolean("body.stream_options.continuous_usage_stats", cu, true)
	return o
}

// cacheSalt type-checks cache_salt (str | None, 1..1024 characters; the
// tighter rules are validate_cache_salt's, run before).
func (d *decoder) cacheSalt(s span) (string, bool) {
	v, ok := d.str("body.cache_salt", s, true)
	if ok && utf8.RuneCountInString(v) > 1024 {
		d.fail("body.cache_salt", "String should have at most 1024 characters")
		return "", false
	}
	return v, ok
}

// toolChoice type-checks tool_choice: "none" | "auto" | "required" | named | None.
func (d *decoder) toolChoice(s span) {
	switch s.kind {
	case kNone, kNull, kObject:
		return
	case kString:
		switch decodeString(d.b[s.start:s.end]) {
		case "none", "auto", "required":
			return
		}
	}
	d.fail("body.tool_choice", "Input should be 'none', 'auto' or 'required'")
}

// messages decodes the chat messages.
func (d *decoder) messages(s span) []Message {
	var out []Message
	each(d.b, s, func(i int, v span) {
		// Where a problem is, built only for one: a request with many
		// messages would otherwise build a string per message (issue 16).
		loc := func(field string) string { return "body.messages." + strconv.Itoa(i) + field }
		if v.kind != kObject {
			d.fail(loc(""), msgDict)
			return
		}
		var role, content span
		members(d.b, v, func(k []byte, mv span) {
			switch string(k) {
			case "role":
				role = mv
			case "content":
				content = mv
			}
		})
		var m Message
		switch role.kind {
		case kNone:
			d.fail(loc(".role"), msgRequired)
		case kString:
			m.Role = decodeRole(d.b[role.start:role.end])
		default:
			m.Role, _ = d.str(loc(".role"), role, false)
		}
		switch content.kind {
		case kNone, kNull:
			m.NoContent = true
		case kString:
			m.Content = decodeString(d.b[content.start:content.end])
		case kArray:
			m.Content, m.NonText = d.parts(loc(".content"), content)
		default:
			d.fail(loc(".content"), "Input should be a valid string or list of content parts")
		}
		out = append(out, m)
	})
	return out
}

// decodeRole is decodeString of a message's role, without an allocation
// for the roles of the chat API.
func decodeRole(q []byte) string {
	switch string(q) {
	case `"user"`:
		return "user"
	case `"assistant"`:
		return "assistant"
	case `"system"`:
		return "system"
	case `"developer"`:
		return "developer"
	case `"tool"`:
		return "tool"
	}
	return decodeString(q)
}

// parts joins the text parts of a content list with "\n".
func (d *decoder) parts(loc string, s span) (text string, nonText bool) {
	var buf []byte
	n := 0
	each(d.b, s, func(i int, p span) {
		ploc := loc + "." + strconv.Itoa(i)
		var t string
		switch p.kind {
		case kString: // a bare string part is text (vLLM's ChatCompletionContentPartParam includes str)
			t = decodeString(d.b[p.start:p.end])
		case kObject:
			var typ, txt span
			members(d.b, p, func(k []byte, v span) {
				switch string(k) {
				case "type":
					typ = v
				case "text":
					txt = v
				}
			})
			if typ.kind != kString || decodeString(d.b[typ.start:typ.end]) != "text" {
				nonText = true
				return
			}
			var ok bool
			if t, ok = d.str(ploc+".text", txt, false); !ok {
				if txt.kind == kNone {
					d.fail(ploc+".text", msgRequired)
				}
				return
			}
		default:
			d.fail(ploc, "Input should be a valid dictionary or string")
			return
		}
		if n > 0 {
			buf = append(buf, '\n')
		}
		buf = append(buf, t...)
		n++
	})
	return string(buf), nonText
}

// prompt decodes a completion prompt:
// list[int>=0] | list[list[int>=0]] | str | list[str] | None.
//
// Pydantic tries the members in smart mode: an exact list[str] wins, then
// list[int] with lax conversion ("7" and true are ints), then
// list[list[int]]. When none fits, vLLM's handler reports the first error,
// which belongs to list[int]: the first element that is not an int >= 0.
func (d *decoder) prompt(s span) Prompt {
	const loc = "body.prompt"
	switch s.kind {
	case kNone, kNull:
		return Prompt{}
	case kString:
		return Prompt{Kind: PromptText, Count: 1, Text: decodeString(d.b[s.start:s.end])}
	case kArray:
	default:
		d.fail(loc, msgList)
		return Prompt{}
	}
	var elems []span
	each(d.b, s, func(_ int, v span) { elems = append(elems, v) })
	if len(elems) == 0 {
		return Prompt{Kind: PromptTokens} // [] is an empty list[int]; Check refuses it
	}
	allStrings, allArrays := true, true
	for _, v := range elems {
		allStrings = allStrings && v.kind == kString
		allArrays = allArrays && v.kind == kArray
	}
	if allStrings {
		return Prompt{Kind: PromptText, Count: len(elems), Text: decodeString(d.b[elems[0].start:elems[0].end])}
	}
	if ids, bad, msg := tokenList(d.b, elems); bad < 0 {
		return Prompt{Kind: PromptTokens, Count: 1, Tokens: ids}
	} else if !allArrays {
		d.fail(loc+"."+strconv.Itoa(bad), msg)
		return Prompt{}
	}
	p := Prompt{Kind: PromptTokens, Count: len(elems)}
	for i, v := range elems {
		var inner []span
		each(d.b, v, func(_ int, e span) { inner = append(inner, e) })
		ids, bad, _ := tokenList(d.b, inner)
		if bad >= 0 {
			// list[int] failed first, at element 0 (a list is not an int).
			d.fail(loc+".0", msgInt)
			return Prompt{}
		}
		if i == 0 {
			p.Tokens = ids
		}
	}
	return p
}

// tokenList converts elements to token ids (lax ints >= 0). bad is the index
// of the first element that is not one, with pydantic's message, or -1.
func tokenList(b []byte, elems []span) (ids []uint32, bad int, msg string) {
	ids = make([]uint32, 0, len(elems))
	for i, v := range elems {
		n, m, ok := intValue(b, v)
		switch {
		case m != "":
			return nil, i, m
		case !ok:
			return nil, i, msgInt
		case n < 0:
			return nil, i, "Input should be greater than or equal to 0"
		case n > math.MaxUint32:
			// pydantic takes it; vLLM fails later on a token id outside the vocabulary.
			return nil, i, "Input should be less than or equal to 4294967295"
		}
		ids = append(ids, uint32(n))
	}
	return ids, -1, ""
}

// ErrEmptyPrompt is vLLM's answer to a prompt of no tokens
// (InputProcessor._validate_prompt_len, a VLLMValidationError with no
// parameter): 400 BadRequestError, param null.
var ErrEmptyPrompt = &Error{Status: 400, Type: TypeBadRequestError, Message: "The decoder prompt cannot be empty"}

// ParsePrompt reads only the prompt of a /v1/completions body, as
// ParseCompletion types it (vLLM's pydantic union), for a caller that routes
// on it without serving it: the gateway. A body that is not JSON, a prompt of
// the wrong shape (mixed strings and ids, negative ids, ids with a fraction,
// lists of lists mixed with ids) and a token list with no ids, the first or
// any later one of a batch, are an *Error with status 400, in the API's
// shape; an absent or null prompt is Prompt{} and no error (vLLM may take
// prompt_embeds instead). Other fields are left to the engine.
func ParsePrompt(body []byte) (Prompt, error) {
	var f fields
	b, err := scan(body, &f)
	if err != nil {
		return Prompt{}, err
	}
	d := decoder{b: b}
	p := d.prompt(f[fPrompt])
	if len(d.errs) > 0 {
		return Prompt{}, validationErrors(d.errs, "")
	}
	if p.Kind != PromptTokens {
		return p, nil
	}
	if p.Count == 0 || len(p.Tokens) == 0 {
		return Prompt{}, ErrEmptyPrompt
	}
	if s := f[fPrompt]; p.Count > 1 {
		empty := false
		each(b, s, func(_ int, v span) { empty = empty || emptyArray(b, v) })
		if empty {
			return Prompt{}, ErrEmptyPrompt
		}
	}
	return p, nil
}

// emptyArray reports whether the array v holds no element ("[ ]").
func emptyArray(b []byte, v span) bool {
	n := 0
	each(b, v, func(int, span) { n++ })
	return n == 0
}
