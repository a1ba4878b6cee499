package openai

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
)

const hi = `"messages":[{"role":"user","content":"hi"}]`

// TestParseChatErrors covers every 400 ParseChat returns: status, type,
// param and a piece of the message.
func TestParseChatErrors(t *testing.T) {
	f := func(body, typ, param, msg string) {
		t.Helper()
		_, err := ParseChat([]byte(body))
		var e *Error
		if !errors.As(err, &e) {
			t.Fatalf("ParseChat(%s) = %v, want an *Error", body, err)
		}
		if e.Status != 400 || e.Type != typ || e.Param != param || !strings.Contains(e.Message, msg) {
			t.Fatalf("ParseChat(%s) =\n  %d %q param=%q %q\nwant 400 %q param=%q containing %q",
				body, e.Status, e.Type, e.Param, e.Message, typ, param, msg)
		}
	}
	const br = TypeBadRequest
	// What FastAPI rejects before pydantic.
	f(`{"model":`, br, "body.9", "JSON decode error: Expecting value")
	f(`{"model":"m",}`, br, "body.13", "JSON decode error: Expecting property name enclosed in double quotes")
	f(`{"a":1} x`, br, "body.8", "JSON decode error: Extra data")
	// Offsets and messages as Python's json.loads reports them (checked with CPython 3.11).
	for _, c := range []struct{ doc, msg, pos string }{
		{`{"a":"é`, "Unterminated string starting at", "5"},
		{"{\"a\":\"\t\"}", "Invalid control character at", "6"},
		{`{"a":1,,}`, "Expecting property name enclosed in double quotes", "7"},
		{`{"a" 1}`, "Expecting ':' delimiter", "5"},
		{`{"a":tru}`, "Expecting value", "5"},
		{`[1 2]`, "Expecting ',' delimiter", "3"},
		{`{"a":"\x"}`, "Invalid \\escape", "6"},
		{`{"a":"\u12"}`, "Invalid \\uXXXX escape", "7"},
		{`{"a":01}`, "Expecting ',' delimiter", "6"},
		{`{"a":1.}`, "Expecting ',' delimiter", "6"},
		{`{"a":-}`, "Expecting value", "5"},
		{`{"a":1e}`, "Expecting ',' delimiter", "6"},
		{`{"a":.5}`, "Expecting value", "5"},
		{`{'a':1}`, "Expecting property name enclosed in double quotes", "1"},
		{`{"a":[1,]}`, "Expecting value", "8"},
		{`{"a":-NaN}`, "Expecting value", "5"},
		{`{"a":1}}`, "Extra data", "7"},
		{`{"é":"é" x}`, "Expecting ',' delimiter", "9"},
	} {
		f(c.doc, br, "body."+c.pos, "JSON decode error: "+c.msg)
	}
	f(``, br, "body", "1 validation error:\n  body: Field required")
	f(`  `, br, "body.2", "Expecting value")
	f(`null`, br, "body", "Field required")
	f(`[]`, br, "body", "Input should be a valid dictionary or object to extract fields from")
	f(`"x"`, br, "body", "valid dictionary")
	f("{\"model\":\"\xff\"}", br, "", "There was an error parsing the body")
	f(strings.Repeat("[", 1001)+strings.Repeat("]", 1001), br, "", "There was an error parsing the body")

	// The request model's "before" validators.
	f(`{`+hi+`,"stream_options":{"include_usage":true}}`, br, "stream_options",
		"Value error, Stream options can only be defined when `stream=True`. (parameter=stream_options)")
	f(`{`+hi+`,"stream":false,"stream_options":{"include_usage":true}}`, br, "stream_options", "Stream options can only be defined when `stream=True`.")
	f(`{`+hi+`,"stream":0,"stream_options":{"x":1}}`, br, "stream_options", "Stream options")
	f(`{`+hi+`,"stream":true,"stream":false,"stream_options":{"x":1}}`, br, "stream_options", "Stream options") // last duplicate wins
	f(`{`+hi+`,"continue_final_message":true,"add_generation_prompt":true}`, br, "body",
		"Value error, Cannot set both `continue_final_message` and `add_generation_prompt` to True.")
	f(`{`+hi+`,"cache_salt":""}`, br, "cache_salt", "Parameter 'cache_salt' must be a non-empty string if provided. (parameter=cache_salt)")
	f(`{`+hi+`,"cache_salt":7}`, br, "cache_salt", "must be a non-empty string")
	f(`{`+hi+`,"cache_salt":"a/b"}`, br, "cache_salt", `must be at most 128 characters and must not contain '@', '/', '\\', or NUL.`)
	f(`{`+hi+`,"cache_salt":"`+strings.Repeat("é", 129)+`"}`, br, "cache_salt", "at most 128 characters")
	f(`{`+hi+`,"top_logprobs":2}`, br, "top_logprobs", "when using `top_logprobs`, `logprobs` must be set to true.")
	f(`{`+hi+`,"top_logprobs":"x","logprobs":true}`, br, "top_logprobs", "`top_logprobs` must be an integer. (parameter=top_logprobs, value=x)")
	f(`{`+hi+`,"top_logprobs":-2.5}`, br, "top_logprobs", "`top_logprobs` must be a positive value or -1. (parameter=top_logprobs, value=-2.5)")
	f(`{`+hi+`,"prompt_logprobs":[1]}`, br, "prompt_logprobs", "value=[1])")
	f(`{`+hi+`,"prompt_logprobs":1,"stream":true}`, br, "prompt_logprobs", "`prompt_logprobs` are not available when `stream=True`.")
	f(`{`+hi+`,"prompt_logprobs":-3}`, br, "prompt_logprobs", "must be a positive value or -1. (parameter=prompt_logprobs, value=-3)")
	f(`{`+hi+`,"logprob_token_ids":[]}`, br, "logprob_token_ids", "`logprob_token_ids` must not be an empty list.")
	f(`{`+hi+`,"logprob_token_ids":"x","top_logprobs":5}`, br, "body.logprob_token_ids", msgList) // check_logprobs returns early
	f(`{`+hi+`,"logprob_token_ids":[1]}`, br, "logprob_token_ids", "when using `logprob_token_ids`, `logprobs` must be set to true.")
	f(`{`+hi+`,"tools":[]}`, br, "tools", "`tools` must not be an empty array.")
	f(`{`+hi+`,"tool_choice":"auto"}`, br, "tool_choice", "When using `tool_choice`, `tools` must be set.")
	tools := `"tools":[{"type":"function","function":{"name":"get_weather"}}]`
	f(`{`+hi+`,`+tools+`,"tool_choice":"bogus"}`, br, "tool_choice",
		"Invalid value for `tool_choice`: bogus! Only named tools, \"none\", \"auto\" or \"required\" are supported.")
	f(`{`+hi+`,`+tools+`,"tool_choice":{"function":3}}`, br, "tool_choice.function", "Invalid value for `function`: `3` in `tool_choice`!")
	f(`{`+hi+`,`+tools+`,"tool_choice":{"function":{}}}`, br, "tool_choice.function.name", "Expected field `name`")
	f(`{`+hi+`,`+tools+`,"tool_choice":{"function":{"name":"nope"}}}`, br, "tool_choice",
		"The tool specified in `tool_choice` does not match any of the specified `tools`")
	f(`{`+hi+`,"response_format":{"type":"json_schema"}}`, br, "response_format",
		"When response_format type is 'json_schema', the 'json_schema' field must be provided.")

	// Field types, checked after the validators.
	f(`{"model":"m"}`, br, "body.messages", "body.messages: Field required")
	f(`{"messages":"hi"}`, br, "body.messages", msgList)
	f(`{"messages":[3]}`, br, "body.messages.0", msgDict)
	f(`{"messages":[{"content":"hi"}]}`, br, "body.messages.0.role", msgRequired)
	f(`{"messages":[{"role":1,"content":"hi"}]}`, br, "body.messages.0.role", msgString)
	f(`{"messages":[{"role":"user","content":7}]}`, br, "body.messages.0.content", "valid string or list")
	f(`{"messages":[{"role":"user","content":[7]}]}`, br, "body.messages.0.content.0", "valid dictionary or string")
	f(`{"messages":[{"role":"user","content":[{"type":"text"}]}]}`, br, "body.messages.0.content.0.text", msgRequired)
	f(`{`+hi+`,"model":5}`, br, "body.model", msgString)
	f(`{`+hi+`,"max_tokens":"abc"}`, br, "body.max_tokens", msgIntParse)
	f(`{`+hi+`,"max_tokens":1.5}`, br, "body.max_tokens", msgIntFraction)
	f(`{`+hi+`,"max_tokens":NaN}`, br, "body.max_tokens", msgFinite)
	f(`{`+hi+`,"max_tokens":[]}`, br, "body.max_tokens", msgInt)
	f(`{`+hi+`,"max_completion_tokens":true,"seed":99999999999999999999}`, br, "body.seed", msgIntMax)
	f(`{`+hi+`,"stream":"maybe"}`, br, "body.stream", msgBoolParse)
	f(`{`+hi+`,"stream":0.5}`, br, "body.stream", msgBool)
	f(`{`+hi+`,"echo":null}`, br, "body.echo", msgBool)
	f(`{`+hi+`,"add_generation_prompt":2}`, br, "body.add_generation_prompt", msgBoolParse)
	f(`{`+hi+`,"temperature":"hot"}`, br, "body.temperature", msgFloatParse)
	f(`{`+hi+`,"top_p":{}}`, br, "body.top_p", msgFloat)
	f(`{`+hi+`,"request_id":null}`, br, "body.request_id", msgString)
	f(`{`+hi+`,"user":1}`, br, "body.user", msgString)
	f(`{`+hi+`,"stop":[1]}`, br, "body.stop", msgString)
	f(`{`+hi+`,"stop_token_ids":["a"]}`, br, "body.stop_token_ids.0", msgIntParse)
	f(`{`+hi+`,"logit_bias":{"50256":"x"}}`, br, "body.logit_bias.50256", msgFloatParse)
	f(`{`+hi+`,"stream":true,"stream_options":{"include_usage":"x"}}`, br, "body.stream_options.include_usage", msgBoolParse)
	f(`{`+hi+`,"stream":true,"stream_options":"yes"}`, br, "body.stream_options", "instance of StreamOptions")
	f(`{`+hi+`,"tool_choice":"sometimes","tools":null}`, br, "tool_choice", "`tools` must be set")
	f(`{`+hi+`,"cache_salt":"`+strings.Repeat("a", 100)+`","stream":[],"n":"x"}`, br, "body.n",
		"2 validation errors:\n  body.n: "+msgIntParse+"\n  body.stream: "+msgBool) // declaration order
}

func TestParseChat(t *testing.T) {
	r, err := ParseChat([]byte(`{"model":"m","messages":[` +
		`{"role":"system","content":"be brief"},` +
		`{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"x"}},"b",{"type":"text","text":"c"}]},` +
		`{"role":"assistant","content":null},` +
		`{"role":"tool"}],` +
		`"max_tokens":"12","max_completion_tokens":7.0,"stream":"true","stream_options":{"include_usage":1,"extra":true},` +
		`"n":null,"logprobs":false,"top_logprobs":0,"cache_salt":"tenant-1","ignore_eos":"yes","user":"u",` +
		`"request_id":"rid","temperature":NaN,"top_p":"1_0","seed":-5,"stop":"###","min_tokens":true,"priority":"-3",` +
		`"add_generation_prompt":false,"unknown":{"deep":[1,2,{"x":null}]},"\u006dodel":"m2"}`))
	if err != nil {
		t.Fatal(err)
	}
	want := &ChatRequest{
		Model: "m2",
		Messages: []Message{
			{Role: "system", Content: "be brief"},
			{Role: "user", Content: "a\nb\nc", NonText: true},
			{Role: "assistant", NoContent: true},
			{Role: "tool", NoContent: true},
		},
		MaxTokens:           Opt[int64]{12, true},
		MaxCompletionTokens: Opt[int64]{7, true},
		Stream:              true,
		StreamOptions:       StreamOptions{Set: true, IncludeUsage: true},
		N:                   1,
		CacheSalt:           "tenant-1",
		IgnoreEOS:           true,
		User:                "u",
		RequestID:           Opt[string]{"rid", true},
		TopP:                Opt[float64]{10, true},
		Seed:                Opt[int64]{-5, true},
		Stop:                []string{"###"},
		MinTokens:           1,
		Priority:            -3,
	}
	if !math.IsNaN(r.Temperature.Value) || !r.Temperature.Set {
		t.Errorf("temperature = %+v, want NaN", r.Temperature)
	}
	r.Temperature = Opt[float64]{}
	if !reflect.DeepEqual(r, want) {
		t.Errorf("got  %+v\nwant %+v", r, want)
	}
	if n, ok := r.MaxOutputTokens(); n != 7 || !ok {
		t.Errorf("MaxOutputTokens = %d, %v", n, ok)
	}
	if got := r.ResponseRole("assistant"); got != "tool" {
		t.Errorf("ResponseRole = %q, want the last message's role", got)
	}

	// Defaults, a BOM and escapes.
	r, err = ParseChat([]byte("\xef\xbb\xbf{\"messages\":[{\"role\":\"user\",\"content\":\"\\ud83d\\ude00\\u2028\\\"<\\/\\ud800\"}]}"))
	if err != nil {
		t.Fatal(err)
	}
	if !r.AddGenerationPrompt || r.N != 1 || r.Stream || r.StreamOptions.Set || r.Model != "" {
		t.Errorf("defaults: %+v", r)
	}
	if got, want := r.Messages[0].Content, "😀\u2028\"</\uFFFD"; got != want {
		t.Errorf("content = %q, want %q", got, want)
	}
	if r.ResponseRole("assistant") != "assistant" {
		t.Error("ResponseRole with add_generation_prompt")
	}

	// Inputs vLLM lets through: falsy stream_options, truthy-but-false stream.
	for _, body := range []string{
		`{` + hi + `,"stream_options":{}}`,
		`{` + hi + `,"stream_options":null}`,
		`{` + hi + `,"stream":"false","stream_options":{"include_usage":true}}`,
		`{` + hi + `,"continue_final_message":true}`,
		`{` + hi + `,"continue_final_message":true,"add_generation_prompt":false}`,
		`{` + hi + `,"tools":[{"type":"function","function":{"name":"f"}}],"tool_choice":{"type":"function","function":{"name":"f"}}}`,
		`{` + hi + `,"tool_choice":"none"}`,
		`{` + hi + `,"response_format":{"type":"json_schema","json_schema":{"name":"x"}}}`,
		`{` + hi + `,"top_logprobs":-1,"logprobs":true}`,
		`{"messages":[]}`,
	} {
		if _, err := ParseChat([]byte(body)); err != nil {
			t.Errorf("ParseChat(%s): %v", body, err)
		}
	}
}

func TestParseCompletion(t *testing.T) {
	f := func(body string, want Prompt) {
		t.Helper()
		r, err := ParseCompletion([]byte(body))
		if err != nil {
			t.Fatalf("ParseCompletion(%s): %v", body, err)
		}
		if !reflect.DeepEqual(r.Prompt, want) {
			t.Fatalf("ParseCompletion(%s).Prompt = %+v, want %+v", body, r.Prompt, want)
		}
	}
	f(`{"prompt":"Once upon"}`, Prompt{Kind: PromptText, Count: 1, Text: "Once upon"})
	f(`{"prompt":["Once upon"]}`, Prompt{Kind: PromptText, Count: 1, Text: "Once upon"})
	f(`{"prompt":["a","b"]}`, Prompt{Kind: PromptText, Count: 2, Text: "a"})
	f(`{"prompt":[1,2,3]}`, Prompt{Kind: PromptTokens, Count: 1, Tokens: []uint32{1, 2, 3}})
	f(`{"prompt":[[4,5]]}`, Prompt{Kind: PromptTokens, Count: 1, Tokens: []uint32{4, 5}})
	f(`{"prompt":[[4,5],[6]]}`, Prompt{Kind: PromptTokens, Count: 2, Tokens: []uint32{4, 5}})
	f(`{"prompt":[1,"2",true,3.0]}`, Prompt{Kind: PromptTokens, Count: 1, Tokens: []uint32{1, 2, 1, 3}}) // lax list[int]
	f(`{"prompt":["1","2"]}`, Prompt{Kind: PromptText, Count: 2, Text: "1"})                             // exact list[str] wins
	f(`{"prompt":[]}`, Prompt{Kind: PromptTokens, Count: 0})

	r, err := ParseCompletion([]byte(`{"model":"m","prompt":"x","max_tokens":null,"echo":null,"logprobs":null,"stream":true,"stream_options":{"continuous_usage_stats":true,"include_usage":true},"suffix":"s","request_id":""}`))
	if err != nil {
		t.Fatal(err)
	}
	if r.MaxTokens != 16 || r.N != 1 || r.Echo || r.Logprobs.Set || !r.Stream || r.Suffix != "s" || r.RequestID != (Opt[string]{"", true}) {
		t.Errorf("got %+v", r)
	}
	if final, cont := r.StreamOptions.Usage(false); !final || !cont {
		t.Errorf("Usage() = %v, %v", final, cont)
	}

	e := func(body, param, msg string) {
		t.Helper()
		_, err := ParseCompletion([]byte(body))
		var e *Error
		if !errors.As(err, &e) || e.Status != 400 || e.Type != TypeBadRequest || e.Param != param || !strings.Contains(e.Message, msg) {
			t.Fatalf("ParseCompletion(%s) = %v, want 400 Bad Request param=%q containing %q", body, err, param, msg)
		}
	}
	e(`{"model":"m"}`, "prompt", "Value error, Either prompt or prompt_embeds must be provided and non-empty. (parameter=prompt)")
	e(`{"prompt":""}`, "prompt", "Either prompt or prompt_embeds")
	e(`{"prompt":null,"prompt_embeds":[]}`, "prompt", "Either prompt or prompt_embeds")
	e(`{"prompt":"x","stream_options":{"include_usage":true}}`, "stream_options", "Stream options can only be defined when `stream=True`.")
	e(`{"prompt":"x","logprobs":-2}`, "logprobs", "`logprobs` must be a positive value or -1. (parameter=logprobs, value=-2)")
	e(`{"prompt":"x","logprobs":"1"}`, "logprobs", "`logprobs` must be an integer. (parameter=logprobs, value=1)")
	e(`{"prompt":"x","logprob_token_ids":[1]}`, "logprob_token_ids", "when using `logprob_token_ids`, `logprobs` must be set.")
	e(`{"prompt":"x","logprob_token_ids":[1],"logprobs":0,"echo":true,"max_tokens":0}`, "logprob_token_ids", "`echo=True` and `max_tokens=0`")
	e(`{"prompt":"x","cache_salt":"a@b"}`, "cache_salt", "must not contain")
	e(`{"prompt":[-1]}`, "body.prompt.0", "greater than or equal to 0")
	e(`{"prompt":[4294967296]}`, "body.prompt.0", "less than or equal to 4294967295")
	e(`{"prompt":[1,"a"]}`, "body.prompt.1", msgIntParse)
	e(`{"prompt":["a",1]}`, "body.prompt.0", msgIntParse)
	e(`{"prompt":[[1],2]}`, "body.prompt.0", msgInt)
	e(`{"prompt":[[-1]]}`, "body.prompt.0", msgInt)
	e(`{"prompt":5}`, "body.prompt", msgList)
	e(`{"prompt":"x","n":null}`, "body.n", msgInt)
	e(`{"prompt":"x","max_tokens":"many"}`, "body.max_tokens", msgIntParse)
	e(`{"prompt":"x","prompt_embeds":5}`, "body.prompt_embeds", "valid bytes")
}

// TestCheck covers the 400s that come after the model check: vLLM's
// SamplingParams errors and this simulator's refusals.
func TestCheck(t *testing.T) {
	f := func(check func() error, typ, param, msg string) {
		t.Helper()
		err := check()
		var e *Error
		if !errors.As(err, &e) || e.Status != 400 || e.Type != typ || e.Param != param || e.Message != msg {
			t.Fatalf("Check() = %#v\nwant 400 %q param=%q %q", err, typ, param, msg)
		}
	}
	chat := func(extra string) func() error {
		return func() error {
			r, err := ParseChat([]byte(`{` + hi + extra + `}`))
			if err != nil {
				t.Fatal(err)
			}
			return r.Check()
		}
	}
	cmpl := func(extra string) func() error {
		return func() error {
			r, err := ParseCompletion([]byte(`{"prompt":"x"` + extra + `}`))
			if err != nil {
				t.Fatal(err)
			}
			return r.Check()
		}
	}
	const bre = TypeBadRequestError
	f(chat(`,"n":0`), bre, "", "n must be at least 1, got 0.")
	f(chat(`,"max_tokens":0`), bre, "max_tokens", "max_tokens must be at least 1, got 0. (parameter=max_tokens, value=0)")
	f(chat(`,"max_tokens":10,"max_completion_tokens":-1`), bre, "max_tokens", "max_tokens must be at least 1, got -1. (parameter=max_tokens, value=-1)")
	f(chat(`,"n":2`), bre, "n", "n > 1 is not supported by this simulator, which returns one choice per request; set n to 1 or omit it.")
	f(chat(`,"best_of":2`), bre, "best_of", "best_of > 1 is not supported by this simulator; set best_of to 1 or omit it.")
	f(chat(`,"logprobs":true`), bre, "logprobs", "logprobs is not supported by this simulator; omit it or set it to false.")
	f(chat(`,"logprobs":true,"top_logprobs":3`), bre, "logprobs", "logprobs is not supported by this simulator; omit it or set it to false.")
	f(chat(`,"echo":true`), bre, "echo", "echo is not supported by this simulator; omit it or set it to false.")
	f(cmpl(`,"n":-1`), bre, "", "n must be at least 1, got -1.")
	f(cmpl(`,"max_tokens":0`), bre, "max_tokens", "max_tokens must be at least 1, got 0. (parameter=max_tokens, value=0)")
	f(cmpl(`,"max_tokens":0,"echo":true`), bre, "echo", "echo is not supported by this simulator; omit it or set it to false.")
	f(cmpl(`,"n":3`), bre, "n", "n > 1 is not supported by this simulator, which returns one choice per request; set n to 1 or omit it.")
	f(cmpl(`,"best_of":4`), bre, "best_of", "best_of > 1 is not supported by this simulator; set best_of to 1 or omit it.")
	f(cmpl(`,"logprobs":0`), bre, "logprobs", "logprobs is not supported by this simulator; omit it or set it to null.")
	f(cmpl(`,"prompt":[]`), bre, "", "The decoder prompt cannot be empty")
	f(cmpl(`,"prompt":[[]]`), bre, "", "The decoder prompt cannot be empty")
	f(cmpl(`,"prompt_embeds":"AAAA"`), bre, "prompt_embeds", "prompt_embeds is not supported by this simulator; send prompt as text or token ids.")

	for _, body := range []string{`{` + hi + `,"n":1,"best_of":1,"logprobs":false,"echo":false,"max_tokens":1}`, `{` + hi + `}`} {
		r, err := ParseChat([]byte(body))
		if err != nil || r.Check() != nil {
			t.Errorf("%s: %v / %v", body, err, r.Check())
		}
	}
	r, err := ParseCompletion([]byte(`{"prompt":[[1,2]],"n":1,"best_of":null,"logprobs":null,"echo":false}`))
	if err != nil || r.Check() != nil {
		t.Errorf("completion: %v / %v", err, r.Check())
	}
}

func TestStreamOptionsUsage(t *testing.T) {
	f := func(o StreamOptions, force, final, cont bool) {
		t.Helper()
		if gf, gc := o.Usage(force); gf != final || gc != cont {
			t.Fatalf("%+v.Usage(%v) = %v, %v; want %v, %v", o, force, gf, gc, final, cont)
		}
	}
	f(StreamOptions{}, false, false, false)
	f(StreamOptions{}, true, true, false)
	f(StreamOptions{Set: true}, false, false, false) // {} asks for nothing (vLLM PR #36379)
	f(StreamOptions{Set: true, IncludeUsage: true}, false, true, false)
	f(StreamOptions{Set: true, ContinuousUsageStats: true}, false, false, false)
	f(StreamOptions{Set: true, ContinuousUsageStats: true}, true, true, true)
	f(StreamOptions{Set: true, IncludeUsage: true, ContinuousUsageStats: true}, false, true, true)
}

func TestCheckContentType(t *testing.T) {
	for _, ct := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON"} {
		if err := CheckContentType(ct); err != nil {
			t.Errorf("CheckContentType(%q) = %v", ct, err)
		}
	}
	for _, ct := range []string{"", "text/plain", "application/json-seq", " application/json", "application/vnd.api+json"} {
		err, _ := CheckContentType(ct).(*Error)
		if err == nil || err.Status != 400 || err.Type != TypeBadRequest || err.Param != "header.content-type" ||
			!strings.Contains(err.Message, "Unsupported Media Type: Only 'application/json' is allowed") {
			t.Errorf("CheckContentType(%q) = %v", ct, err)
		}
	}
}

func TestPyRepr(t *testing.T) {
	f := func(lit, want string) {
		t.Helper()
		var r reader
		r.b = []byte(lit)
		s := r.value()
		if r.err != nil {
			t.Fatal(r.err.msg)
		}
		if got := pyStr(r.b, s); got != want {
			t.Fatalf("pyStr(%s) = %q, want %q", lit, got, want)
		}
	}
	f(`"abc"`, "abc")
	f(`null`, "None")
	f(`true`, "True")
	f(`-0`, "0")
	f(`12345678901234567890123`, "12345678901234567890123")
	f(`1.0`, "1.0")
	f(`1e6`, "1000000.0")
	f(`1e16`, "1e+16")
	f(`0.00001`, "1e-05")
	f(`-2.5`, "-2.5")
	f(`NaN`, "nan")
	f(`-Infinity`, "-inf")
	f(`[1,"a'b",{"k":"it's \"q\""},[],{}]`, `[1, "a'b", {'k': 'it\'s "q"'}, [], {}]`)
	f(`["\n\u0001"]`, `['\n\x01']`)
}

// The parsed request must not alias the body: fasthttp reuses it.
func TestParseCopiesBody(t *testing.T) {
	body := []byte(`{"model":"mmm","messages":[{"role":"user","content":"hello"}],"stop":["xx"],"cache_salt":"salt","request_id":"rid"}`)
	r, err := ParseChat(body)
	if err != nil {
		t.Fatal(err)
	}
	c := []byte(`{"prompt":"hello","model":"mmm"}`)
	cr, err := ParseCompletion(c)
	if err != nil {
		t.Fatal(err)
	}
	for i := range body {
		body[i] = 'X'
	}
	for i := range c {
		c[i] = 'X'
	}
	if r.Model != "mmm" || r.Messages[0].Role != "user" || r.Messages[0].Content != "hello" || r.Stop[0] != "xx" ||
		r.CacheSalt != "salt" || r.RequestID.Value != "rid" || cr.Prompt.Text != "hello" || cr.Model != "mmm" {
		t.Fatalf("request aliases the body: %+v %+v", r, cr)
	}
}
