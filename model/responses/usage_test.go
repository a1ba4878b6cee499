package responses

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/inferrail/inferrail/model/openai"
)

// completed is a response.completed event's data as vLLM writes it
// (model_dump_json: the response first, its usage after its output, the
// type last), with an output of n bytes.
func completed(n int) string {
	return `{"response":{"id":"resp_1","created_at":1,"instructions":null,"model":"m","object":"response","output":[{"id":"msg_1","content":[{"annotations":[],"text":"` +
		strings.Repeat("x", n) + `","type":"output_text","logprobs":null}],"role":"assistant","status":"completed","type":"message"}],` +
		`"status":"completed","truncation":"disabled","usage":{"input_tokens":120,"input_tokens_details":{"cached_tokens":96,"input_tokens_per_turn":[],"cached_tokens_per_turn":[]},` +
		`"output_tokens":9,"output_tokens_details":{"reasoning_tokens":0,"tool_output_tokens":0},"total_tokens":129},"user":null},"sequence_number":12,"type":"response.completed"}`
}

func TestFindUsage(t *testing.T) {
	want := openai.Usage{PromptTokens: 120, CompletionTokens: 9, CachedTokens: 96, Details: true}
	if u, ok := FindUsage([]byte(completed(10))); !ok || u != want {
		t.Errorf("event: %+v %v, want %+v", u, ok, want)
	}
	body := `{"id":"resp_1","usage":{"input_tokens":120,"input_tokens_details":{"cached_tokens":96},"output_tokens":9}}`
	if u, ok := FindUsage([]byte(body)); !ok || u != want {
		t.Errorf("body: %+v %v, want %+v", u, ok, want)
	}
	for _, b := range []string{`{"usage":null}`, `{"usage":{"output_tokens":1}}`, `{"response":{"usage":null}}`, `[]`} {
		if _, ok := FindUsage([]byte(b)); ok {
			t.Errorf("FindUsage(%s) found a usage", b)
		}
	}
}

// TestFinal: the end of the last event tells a finished stream and its
// usage, whether the event is whole or only its last bytes are held.
func TestFinal(t *testing.T) {
	want := openai.Usage{PromptTokens: 120, CompletionTokens: 9, CachedTokens: 96, Details: true}
	ev := completed(5000)
	for _, c := range []struct {
		v     string
		whole bool
	}{{ev, true}, {ev[len(ev)-1500:], false}} {
		final, u, found := Final([]byte(c.v), c.whole)
		if !final || !found || u != want {
			t.Errorf("whole=%v: final %v, usage %+v %v; want the usage %+v", c.whole, final, u, found, want)
		}
	}
	for _, c := range []struct {
		v     string
		whole bool
	}{
		{`{"type":"response.output_text.delta","delta":"x","sequence_number":3}`, true},
		{`xt","type":"response.output_text.delta"}`, false},
		{ev[len(ev)-1500 : len(ev)-1], false},
	} {
		if final, _, _ := Final([]byte(c.v), c.whole); final {
			t.Errorf("Final(%q) reports the stream's end", c.v)
		}
	}
	if final, _, found := Final([]byte(`{"type":"error","code":"x","message":"m","sequence_number":4}`), true); !final || found {
		t.Errorf("an error event: final %v, usage found %v; want final without usage", final, found)
	}
}

func TestID(t *testing.T) {
	f := func(in, want string) {
		t.Helper()
		if got := ID([]byte(in)); got != want {
			t.Errorf("ID(%q) = %q, want %q", in, got, want)
		}
	}
	f(`{"id":"resp_9","object":"response"}`, "resp_9")
	f("event: response.created\ndata: "+completed(3), "resp_1")
	// A head cut inside the event still holds the id.
	f("event: response.created\ndata: "+completed(3000)[:200], "resp_1")
	f("event: response.created\ndata: {\"response\": {\"object\": \"response\", \"meta\": {\"id\": \"no\"}, \"id\": \"resp_2\"", "resp_2")
	f("event: response.created\ndata: {\"response\":{\"id\":\"resp_", "")
	f("event: response.created\ndata: {\"sequence_number\":0,\"response\":{\"id\":\"r\\\"q\"}}", `r"q`)
	f(`[]`, "")
	f("", "")
}

// AppendFailed writes one response.failed event whose data is the JSON
// OpenAI's Responses API sends, and NextSequence numbers it after the
// events before it.
func TestAppendFailed(t *testing.T) {
	tail := []string{`{"type":"response.output_text.delta","sequence_number":5,"delta":"a"}`,
		`{"type":"response.output_text.delta","sequence_number":6,"delta":"b"}`, `[DONE]`}
	seq := NextSequence(func(fn func(v []byte)) {
		for _, v := range tail {
			fn([]byte(v))
		}
	})
	if seq != 7 {
		t.Fatalf("next sequence %d, want 7", seq)
	}
	b := AppendFailed(nil, "resp_1", seq, `engine "r0" broke`)
	ev, data, ok := strings.Cut(string(b), "\n")
	if !ok || ev != "event: response.failed" || !strings.HasSuffix(data, "\n\n") {
		t.Fatalf("event %q", b)
	}
	var v struct {
		Type     string `json:"type"`
		Seq      int64  `json:"sequence_number"`
		Response struct {
			ID, Object, Status string
			Error              struct{ Code, Message string }
		} `json:"response"`
	}
	if err := json.Unmarshal([]byte(strings.TrimPrefix(strings.TrimSpace(data), "data: ")), &v); err != nil {
		t.Fatalf("%v: %s", err, data)
	}
	if v.Type != "response.failed" || v.Seq != 7 || v.Response.ID != "resp_1" || v.Response.Status != "failed" ||
		v.Response.Error.Code != "server_error" || v.Response.Error.Message != `engine "r0" broke` {
		t.Fatalf("%+v", v)
	}
	if NextSequence(func(func([]byte)) {}) != 0 {
		t.Fatal("no events: want 0")
	}
}
