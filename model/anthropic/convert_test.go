package anthropic

import (
	"errors"
	"strings"
	"testing"
	"time"
)

var now = time.Unix(1700000000, 0)

// The expected bodies follow vLLM's to_chat_completion_request and
// normalize_inline_system (serving.py, inline_system.py @ a8c3bdb20f5d)
// line by line; each case names the rule it checks.
func TestToChat(t *testing.T) {
	f := func(mode InlineMode, body, want string) {
		t.Helper()
		r, err := Parse([]byte(body), false)
		if err != nil {
			t.Fatalf("Parse(%s): %v", body, err)
		}
		got, err := ToChat(r, mode, now)
		if err != nil {
			t.Fatalf("ToChat(%s): %v", body, err)
		}
		if string(got) != want {
			t.Errorf("ToChat(%s)\n got %s\nwant %s", body, got, want)
		}
	}
	// A string system and string content.
	f(Preserve, `{"model":"m","max_tokens":5,"system":"S","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":[{"role":"system","content":"S"},{"role":"user","content":"hi"}],"max_tokens":5}`)
	// System blocks: joined with nothing between them; the billing header
	// block and empty blocks dropped.
	f(Preserve, `{"model":"m","max_tokens":5,"system":[{"type":"text","text":"x-anthropic-billing-header: cc_version=1; cch=ab12;"},{"type":"text","text":"A"},{"type":"text","text":""},{"type":"text","text":"B"}],"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":[{"role":"system","content":"AB"},{"role":"user","content":"hi"}],"max_tokens":5}`)
	// Leading inline system messages follow the system prompt after a
	// blank line; later ones stay in place (preserve), billing header
	// dropped, and one that is only the header vanishes.
	f(Preserve, `{"model":"m","max_tokens":5,"system":"S","messages":[{"role":"system","content":"L"},{"role":"user","content":"q1"},{"role":"assistant","content":"a1"},{"role":"system","content":[{"type":"text","text":"x-anthropic-billing-header: h"},{"type":"text","text":"R"}]},{"role":"system","content":"x-anthropic-billing-header: z"},{"role":"user","content":"q2"}]}`,
		`{"model":"m","messages":[{"role":"system","content":"S\n\nL"},{"role":"user","content":"q1"},{"role":"assistant","content":"a1"},{"role":"system","content":"R"},{"role":"user","content":"q2"}],"max_tokens":5}`)
	// Without any system prompt, preserve folds: after a user turn into
	// its text, after an assistant turn into the next user message's head.
	f(Preserve, `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"q1"},{"role":"system","content":"N1"},{"role":"assistant","content":"a1"},{"role":"system","content":"N2"},{"role":"user","content":[{"type":"text","text":"q2"}]}]}`,
		`{"model":"m","messages":[{"role":"user","content":"q1\n\nN1"},{"role":"assistant","content":"a1"},{"role":"user","content":"N2\n\nq2"}],"max_tokens":5}`)
	// Fold with a system prompt; a trailing system message after an
	// assistant turn becomes a user message.
	f(Fold, `{"model":"m","max_tokens":5,"system":"S","messages":[{"role":"user","content":"q1"},{"role":"assistant","content":"a1"},{"role":"system","content":"T"}]}`,
		`{"model":"m","messages":[{"role":"system","content":"S"},{"role":"user","content":"q1"},{"role":"assistant","content":"a1"},{"role":"user","content":"T"}],"max_tokens":5}`)
	// Tool use and results: text and tool_use in one assistant message
	// (content a string, arguments a JSON string, a missing id named by
	// the clock); a user's tool results become tool messages before its
	// own text; list content's text items joined by newlines; thinking
	// becomes reasoning; a system message between a tool_use and its
	// results moves after them (preserve).
	f(Preserve, `{"model":"m","max_tokens":5,"system":"S","messages":[
		{"role":"user","content":"q"},
		{"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"x"},{"type":"text","text":"let me"},{"type":"tool_use","id":"t1","name":"Read","input":{"path":"a","n":1}},{"type":"tool_use","name":"Ls"}]},
		{"role":"system","content":"R"},
		{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"l1"},{"type":"text","text":"l2"}]},{"type":"tool_result","tool_use_id":"t2","content":"ok"},{"type":"text","text":"go on"}]}]}`,
		`{"model":"m","messages":[{"role":"system","content":"S"},{"role":"user","content":"q"},`+
			`{"role":"assistant","reasoning":"hm","tool_calls":[{"id":"t1","type":"function","function":{"name":"Read","arguments":"{\"path\":\"a\",\"n\":1}"}},{"id":"call_1700000000","type":"function","function":{"name":"Ls","arguments":"{}"}}],"content":"let me"},`+
			`{"role":"tool","tool_call_id":"t1","content":"l1\nl2"},{"role":"tool","tool_call_id":"t2","content":"ok"},{"role":"user","content":"go on"},{"role":"system","content":"R"}],"max_tokens":5}`)
	// A user message of tool results only adds no user message; an
	// assistant message of tool_use only has no content.
	f(Preserve, `{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"a","name":"n","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"a"}]}]}`,
		`{"model":"m","messages":[{"role":"assistant","tool_calls":[{"id":"a","type":"function","function":{"name":"n","arguments":"{}"}}]},{"role":"tool","tool_call_id":"a","content":""}],"max_tokens":5}`)
	// Claude Code's ctx and msg roles are user; several text blocks stay
	// parts; an image is an image_url part (base64 as a data URI).
	f(Preserve, `{"model":"m","max_tokens":5,"messages":[{"role":"ctx","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},{"role":"msg","content":[{"type":"image","source":{"type":"base64","media_type":"image/png","data":"AAA"}}]}]}`,
		`{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]},{"role":"user","content":[{"type":"image_url","image_url":{"url":"data:image/png;base64,AAA"}}]}],"max_tokens":5}`)
	// Tools as model_dump() gives them: description null when absent,
	// "type":"object" added to a schema without one; stream options as
	// vLLM sets them; vLLM's extras carried over.
	f(Preserve, `{"model":"m","max_tokens":9,"stream":true,"cache_salt":"s1","kv_transfer_params":{"do_remote_decode":true},"chat_template_kwargs":{"enable_thinking":false},"tools":[{"name":"Read","input_schema":{"properties":{"p":{"type":"string"}}}},{"name":"W","description":"d","input_schema":{"type":"object"},"strict":true}],"messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":9,"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true},`+
			`"tools":[{"type":"function","function":{"name":"Read","description":null,"parameters":{"properties":{"p":{"type":"string"}},"type":"object"},"strict":null,"defer_loading":null}},`+
			`{"type":"function","function":{"name":"W","description":"d","parameters":{"type":"object"},"strict":true,"defer_loading":null}}],`+
			`"cache_salt":"s1","kv_transfer_params":{"do_remote_decode":true},"chat_template_kwargs":{"enable_thinking":false}}`)
}

// thinking and output_config become reasoning_effort as
// _handle_output_config then _handle_thinking set it: the effort, unless
// thinking is disabled, which is the resolved disabled effort; enabled and
// adaptive thinking leave it unset, and count_tokens bodies have neither.
func TestToChatReasoningEffort(t *testing.T) {
	f := func(count bool, body, disabled, want string) {
		t.Helper()
		r, err := Parse([]byte(body), count)
		if err != nil {
			t.Fatalf("Parse(%s): %v", body, err)
		}
		got, err := ToChatEffort(r, Preserve, disabled, now)
		if err != nil {
			t.Fatalf("ToChat(%s): %v", body, err)
		}
		if string(got) != want {
			t.Errorf("ToChat(%s)\n got %s\nwant %s", body, got, want)
		}
	}
	const msgs = `"messages":[{"role":"user","content":"hi"}]`
	const chat = `{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":5000`
	f(false, `{"model":"m","max_tokens":5000,"thinking":{"type":"disabled"},`+msgs+`}`, "none", chat+`,"reasoning_effort":"none"}`)
	f(false, `{"model":"m","max_tokens":5000,"thinking":{"type":"disabled"},`+msgs+`}`, "low", chat+`,"reasoning_effort":"low"}`)
	f(false, `{"model":"m","max_tokens":5000,"output_config":{"effort":"max"},`+msgs+`}`, "none", chat+`,"reasoning_effort":"max"}`)
	f(false, `{"model":"m","max_tokens":5000,"output_config":{"effort":"high"},"thinking":{"type":"disabled"},`+msgs+`}`, "none", chat+`,"reasoning_effort":"none"}`)
	f(false, `{"model":"m","max_tokens":5000,"thinking":{"type":"enabled","budget_tokens":1024,"display":"omitted"},"output_config":{"effort":null},`+msgs+`}`, "none", chat+`}`)
	f(false, `{"model":"m","max_tokens":5000,"thinking":{"type":"adaptive"},`+msgs+`}`, "none", chat+`}`)
	f(true, `{"model":"m","thinking":{"type":"disabled"},"output_config":{"effort":"low"},`+msgs+`}`, "none", `{"model":"m",`+msgs+`}`)
}

// An assistant's tool_result whose content is a list is "Tool result: "
// and Python's str() of the list (_convert_tool_result_block): dicts and
// strings in repr, with Python's choice of quotes and escapes, True, None,
// floats as repr prints them; an empty list is "".
func TestToChatAssistantToolResult(t *testing.T) {
	f := func(content, want string) {
		t.Helper()
		body := `{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"text","text":"a"},{"type":"tool_result","tool_use_id":"t","content":` + content + `}]}]}`
		r, err := Parse([]byte(body), false)
		if err != nil {
			t.Fatalf("Parse(%s): %v", body, err)
		}
		got, err := ToChat(r, Preserve, now)
		if err != nil {
			t.Fatalf("ToChat(%s): %v", body, err)
		}
		if w := `{"model":"m","messages":[{"role":"assistant","content":` + want + `}],"max_tokens":5}`; string(got) != w {
			t.Errorf("ToChat(%s)\n got %s\nwant %s", body, got, w)
		}
	}
	f(`[{"type":"text","text":"x"}]`, `[{"type":"text","text":"a"},{"type":"text","text":"Tool result: [{'type': 'text', 'text': 'x'}]"}]`)
	f(`[{"type":"text","text":"it's \"q\"\n"},{"n":1.0,"b":true,"z":null,"e":1e5}]`,
		`[{"type":"text","text":"a"},{"type":"text","text":"Tool result: [{'type': 'text', 'text': 'it\\'s \"q\"\\n'}, {'n': 1.0, 'b': True, 'z': None, 'e': 100000.0}]"}]`)
	f(`[]`, `[{"type":"text","text":"a"},{"type":"text","text":"Tool result: "}]`)
}

// A list too deep for Python's json.loads is not converted.
func TestToChatUnsupported(t *testing.T) {
	deep := strings.Repeat(`{"a":[`, 600) + strings.Repeat(`]}`, 600)
	r, err := Parse([]byte(`{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_result","content":[`+deep+`]}]}]}`), false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ToChat(r, Preserve, now); !errors.Is(err, ErrUnsupported) {
		t.Fatalf("err = %v, want ErrUnsupported", err)
	}
}

func TestParseInvalid(t *testing.T) {
	f := func(count bool, body string) {
		t.Helper()
		if _, err := Parse([]byte(body), count); !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%s) = %v, want ErrInvalid", body, err)
		}
	}
	f(false, `[]`)
	f(false, `{"model":"m","messages":[{"role":"user","content":"x"}]}`) // no max_tokens
	f(false, `{"model":"m","max_tokens":0,"messages":[]}`)
	f(false, `{"model":"m","max_tokens":1.5,"messages":[]}`)
	f(false, `{"model":"","max_tokens":1,"messages":[]}`)
	f(true, `{"messages":[]}`)
	f(true, `{"model":"m"}`)
	f(true, `{"model":"m","messages":[{"role":"tool","content":"x"}]}`)
	f(true, `{"model":"m","messages":[{"role":"user"}]}`)
	f(true, `{"model":"m","messages":[{"role":"user","content":[{"type":"video"}]}]}`)
	f(true, `{"model":"m","messages":[{"role":"user","content":[{"type":"text","text":7}]}]}`)
	f(true, `{"model":"m","messages":[{"role":"user","content":[{"type":"tool_use","input":[1]}]}]}`)
	f(true, `{"model":"m","messages":[],"tools":[{"name":"x"}]}`)
	f(true, `{"model":"m","messages":[],"system":5}`)
	// thinking and output_config as vLLM's models read them.
	const m = `"model":"m","max_tokens":2000,"messages":[]`
	f(false, `{`+m+`,"thinking":"off"}`)
	f(false, `{`+m+`,"thinking":{}}`)
	f(false, `{`+m+`,"thinking":{"type":"sometimes"}}`)
	f(false, `{`+m+`,"thinking":{"type":"enabled"}}`)
	f(false, `{`+m+`,"thinking":{"type":"enabled","budget_tokens":1000}}`)
	f(false, `{`+m+`,"thinking":{"type":"enabled","budget_tokens":2000}}`) // not below max_tokens
	f(false, `{`+m+`,"thinking":{"type":"enabled","budget_tokens":1500.5}}`)
	f(false, `{`+m+`,"thinking":{"type":"adaptive","display":"loud"}}`)
	f(false, `{`+m+`,"output_config":[]}`)
	f(false, `{`+m+`,"output_config":{"effort":"extreme"}}`)
	f(false, `{`+m+`,"output_config":{"effort":3}}`)
	// count_tokens bodies have neither field, and vLLM ignores them there.
	if _, err := Parse([]byte(`{"model":"m","messages":[],"thinking":"off","output_config":{"effort":"extreme"}}`), true); err != nil {
		t.Errorf("count_tokens with thinking: %v", err)
	}
	// count_tokens needs no max_tokens.
	if _, err := Parse([]byte(`{"model":"m","messages":[]}`), true); err != nil {
		t.Errorf("count_tokens without max_tokens: %v", err)
	}
}

func TestFindUsage(t *testing.T) {
	f := func(b string, want Usage, ok bool) {
		t.Helper()
		got, found := FindUsage([]byte(b))
		if found != ok || got != want {
			t.Errorf("FindUsage(%s) = %+v, %v; want %+v, %v", b, got, found, want, ok)
		}
	}
	f(`{"id":"msg_1","type":"message","usage":{"input_tokens":10,"output_tokens":4,"cache_read_input_tokens":32}}`,
		Usage{Input: 10, Output: 4, CacheRead: 32, HasInput: true, HasCacheRead: true}, true)
	f(`{"type":"message_start","message":{"id":"m","usage":{"input_tokens":7,"output_tokens":0}}}`,
		Usage{Input: 7, HasInput: true}, true)
	f(`{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":12}}`,
		Usage{Output: 12}, true)
	f(`{"type":"ping"}`, Usage{}, false)
	f(`{"usage":null}`, Usage{}, false)
	f(`not json`, Usage{}, false)
	start, _ := FindUsage([]byte(`{"type":"message_start","message":{"usage":{"input_tokens":7,"cache_read_input_tokens":16,"output_tokens":1}}}`))
	delta, _ := FindUsage([]byte(`{"type":"message_delta","usage":{"output_tokens":12}}`))
	u := Merge(start, delta).OpenAI()
	if u.PromptTokens != 23 || u.CachedTokens != 16 || u.CompletionTokens != 12 || !u.Details {
		t.Errorf("merged usage = %+v", u)
	}
}

func TestAppendError(t *testing.T) {
	f := func(status int, want string) {
		t.Helper()
		if got := string(AppendError(nil, status, `no "x"`)); got != want {
			t.Errorf("AppendError(%d) = %s, want %s", status, got, want)
		}
	}
	f(400, `{"type":"error","error":{"type":"invalid_request_error","message":"no \"x\""}}`)
	f(401, `{"type":"error","error":{"type":"authentication_error","message":"no \"x\""}}`)
	f(404, `{"type":"error","error":{"type":"not_found_error","message":"no \"x\""}}`)
	f(429, `{"type":"error","error":{"type":"rate_limit_error","message":"no \"x\""}}`)
	f(503, `{"type":"error","error":{"type":"overloaded_error","message":"no \"x\""}}`)
	f(502, `{"type":"error","error":{"type":"api_error","message":"no \"x\""}}`)
}

// AppendStreamError is one SSE event named error carrying AppendError's
// body.
func TestAppendStreamError(t *testing.T) {
	got := string(AppendStreamError(nil, TypeAPI, `engine "r0" broke`))
	want := "event: error\ndata: {\"type\":\"error\",\"error\":{\"type\":\"api_error\",\"message\":\"engine \\\"r0\\\" broke\"}}\n\n"
	if got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// KeepBillingHeader, which only the benchmark sets, keeps the billing
// header blocks of the system prompt and of inline system messages where
// they came; without it the same body drops both.
func TestToChatKeepBillingHeader(t *testing.T) {
	body := `{"model":"m","max_tokens":5,"system":[{"type":"text","text":"x-anthropic-billing-header: cch=1;"},{"type":"text","text":"A"}],"messages":[{"role":"user","content":"q1"},{"role":"system","content":"x-anthropic-billing-header: cch=2;"}]}`
	for _, c := range []struct {
		keep bool
		want string
	}{
		{false, `{"model":"m","messages":[{"role":"system","content":"A"},{"role":"user","content":"q1"}],"max_tokens":5}`},
		{true, `{"model":"m","messages":[{"role":"system","content":"x-anthropic-billing-header: cch=1;A"},{"role":"user","content":"q1"},{"role":"system","content":"x-anthropic-billing-header: cch=2;"}],"max_tokens":5}`},
	} {
		r, err := Parse([]byte(body), false)
		if err != nil {
			t.Fatal(err)
		}
		r.KeepBillingHeader = c.keep
		got, err := ToChat(r, Preserve, now)
		if err != nil || string(got) != c.want {
			t.Errorf("keep %v: ToChat = %s (%v)\nwant %s", c.keep, got, err, c.want)
		}
	}
}
