package responses

import (
	"encoding/json"
	"errors"
	"testing"
)

// TestToChat: bodies converted as vLLM's construct_input_messages and
// construct_tool_dicts convert them (utils.py), byte for byte.
func TestToChat(t *testing.T) {
	f := func(body, want string) {
		t.Helper()
		r, err := Parse([]byte(body))
		if err != nil {
			t.Fatalf("Parse(%s): %v", body, err)
		}
		got, err := ToChat(r, nil)
		if err != nil {
			t.Fatalf("ToChat(%s): %v", body, err)
		}
		if string(got) != want {
			t.Errorf("ToChat(%s)\n got %s\nwant %s", body, got, want)
		}
	}
	// A string input is one user message; instructions come first as the system message.
	f(`{"model":"m","instructions":"Be brief.","input":"hi","max_output_tokens":7,"stream":true}`,
		`{"model":"m","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"hi"}],"max_tokens":7,"stream":true}`)
	// Empty instructions add nothing (vLLM tests truthiness).
	f(`{"model":"m","instructions":"","input":"hi"}`, `{"model":"m","messages":[{"role":"user","content":"hi"}]}`)
	// Message items keep role and content, text parts become chat text parts, the item's type/id/status go.
	f(`{"model":"m","input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"d"}]},{"role":"user","content":"q","id":"x","status":"completed"}]}`,
		`{"model":"m","messages":[{"role":"developer","content":[{"type":"text","text":"d"}]},{"role":"user","content":"q"}]}`)
	// An assistant message's content is its first part's text; function calls merge into it; a tool output follows.
	f(`{"model":"m","input":[{"role":"user","content":"weather?"},{"type":"message","role":"assistant","content":[{"type":"output_text","text":"checking"},{"type":"output_text","text":"ignored"}]},`+
		`{"type":"function_call","call_id":"c1","name":"get","arguments":"{\"city\":\"Oslo\"}"},{"type":"function_call","call_id":"c2","name":"get","arguments":"{}"},`+
		`{"type":"function_call_output","call_id":"c1","output":"rain"}]}`,
		`{"model":"m","messages":[{"role":"user","content":"weather?"},{"role":"assistant","content":"checking","tool_calls":[`+
			`{"id":"c1","function":{"name":"get","arguments":"{\"city\":\"Oslo\"}"},"type":"function"},{"id":"c2","function":{"name":"get","arguments":"{}"},"type":"function"}]},`+
			`{"role":"tool","content":"rain","tool_call_id":"c1"}]}`)
	// A function call with no assistant message before it opens one; reasoning merges into it once.
	f(`{"model":"m","input":[{"type":"function_call","call_id":"c","name":"n","arguments":"{}"},{"type":"reasoning","summary":[{"type":"summary_text","text":"s"}]},{"type":"reasoning","content":[{"type":"reasoning_text","text":"r2"}]}]}`,
		`{"model":"m","messages":[{"role":"assistant","reasoning":"s","tool_calls":[{"id":"c","function":{"name":"n","arguments":"{}"},"type":"function"}]},`+
			`{"role":"assistant","reasoning":"r2"}]}`)
	// Function tools as model_dump gives them (extra members kept in order); other tools reach no template.
	f(`{"model":"m","input":"x","tools":[{"type":"function","name":"get","parameters":{"type":"object"},"strict":true},{"type":"web_search_preview"},{"type":"function","name":"n","description":"d"}],"cache_salt":"s"}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"get","description":null,"parameters":{"type":"object"},"strict":true}},`+
			`{"type":"function","function":{"name":"n","description":"d","parameters":null}}],"cache_salt":"s"}`)
	// An unfinished assistant message at the end is continued.
	f(`{"model":"m","input":[{"role":"user","content":"a"},{"type":"message","role":"assistant","status":"incomplete","content":"par"}]}`,
		`{"model":"m","messages":[{"role":"user","content":"a"},{"role":"assistant","content":"par"}],"add_generation_prompt":false,"continue_final_message":true}`)
	// reasoning.effort reaches the template as build_chat_params passes it: reasoning_effort, and
	// enable_thinking whether the effort is not "none".
	f(`{"model":"m","input":"x","reasoning":{"effort":"none","summary":"auto"}}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"enable_thinking":false,"reasoning_effort":"none"}}`)
	f(`{"model":"m","input":"x","reasoning":{"effort":"high"}}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"enable_thinking":true,"reasoning_effort":"high"}}`)
	// The request's own kwargs are kept; its enable_thinking wins, reasoning.effort beats its reasoning_effort,
	// and add_generation_prompt / continue_final_message are the input's.
	f(`{"model":"m","input":"x","reasoning":{"effort":"low"},"chat_template_kwargs":{"enable_thinking":false,"reasoning_effort":"high","add_generation_prompt":false,"custom":[1]}}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"custom":[1],"enable_thinking":false,"reasoning_effort":"low"}}`)
	// No effort (null, or reasoning without one): nothing is added; kwargs alone pass through.
	f(`{"model":"m","input":"x","reasoning":{"effort":null}}`, `{"model":"m","messages":[{"role":"user","content":"x"}]}`)
	f(`{"model":"m","input":"x","reasoning":{"summary":"auto"},"chat_template_kwargs":{"enable_thinking":false}}`,
		`{"model":"m","messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"enable_thinking":false}}`)
}

// TestToChatHistory: a continued response is its stored conversation
// without system messages, its output as assistant messages, then the new
// input, under the new request's instructions only.
func TestToChatHistory(t *testing.T) {
	r, err := Parse([]byte(`{"model":"m","instructions":"new","previous_response_id":"resp_1","input":"more"}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ToChat(r, nil); !errors.Is(err, ErrHistory) {
		t.Fatalf("without the history: %v, want ErrHistory", err)
	}
	hist := &History{Messages: jsonList(`{"role":"system","content":"old"}`, `{"role":"user","content":"first"}`), Output: []string{"answer"}}
	got, err := ToChat(r, hist)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"model":"m","messages":[{"role":"system","content":"new"},{"role":"user","content":"first"},{"role":"assistant","content":"answer"},{"role":"user","content":"more"}]}`
	if string(got) != want {
		t.Errorf("got %s\nwant %s", got, want)
	}
}

func jsonList(items ...string) (out []json.RawMessage) {
	for _, s := range items {
		out = append(out, []byte(s))
	}
	return out
}

// TestParseInvalid: bodies vLLM refuses are ErrInvalid, each for its reason.
func TestParseInvalid(t *testing.T) {
	for _, body := range []string{
		``, `[]`, `{"model":"m"}`, `{"input":null}`, `{"input":5}`, `{"input":[1]}`,
		`{"input":"x","stream":"yes"}`, `{"input":"x","max_output_tokens":1.5}`, `{"input":"x","cache_salt":""}`,
		`{"input":"x","prompt":{"id":"p"}}`, `{"input":"x","store":false,"background":true}`,
		`{"input":[{"type":"function_call","name":"n","arguments":"{}"}]}`,
		`{"input":[{"type":"function_call_output","call_id":"c"}]}`,
		`{"input":[{"role":"robot","content":"x"}]}`, `{"input":[{"role":"user"}]}`, `{"input":[{"role":"user","content":3}]}`,
		`{"input":"x","tools":[{"name":"n"}]}`, `{"input":"x","tools":[{"type":"function"}]}`, `{"input":"x","instructions":1}`,
		`{"input":"x","reasoning":"high"}`, `{"input":"x","reasoning":{"effort":"max"}}`, `{"input":"x","reasoning":{"effort":3}}`,
		`{"input":"x","chat_template_kwargs":[]}`, `{"input":"x","chat_template_kwargs":"a"}`,
	} {
		if _, err := Parse([]byte(body)); !errors.Is(err, ErrInvalid) {
			t.Errorf("Parse(%s) = %v, want ErrInvalid", body, err)
		}
	}
}

// TestToChatUnsupported: items vLLM passes to the chat parser unconverted
// and namespaced tools are not predicted.
func TestToChatUnsupported(t *testing.T) {
	for _, body := range []string{
		`{"input":[{"type":"item_reference","id":"x"}]}`,
		`{"input":[{"type":"function_call","call_id":"c","name":"n","arguments":"{}","namespace":"ns"}]}`,
		`{"input":"x","tools":[{"type":"namespace","name":"ns","tools":[]}]}`,
	} {
		r, err := Parse([]byte(body))
		if err != nil {
			t.Fatalf("Parse(%s): %v", body, err)
		}
		if _, err := ToChat(r, nil); !errors.Is(err, ErrUnsupported) {
			t.Errorf("ToChat(%s) = %v, want ErrUnsupported", body, err)
		}
	}
}
