package sim

import (
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/model/responses"
)

var responsesBody = `{"model":"` + DefaultOptions().Model + `","max_output_tokens":8,` +
	`"instructions":"You are a careful coding agent who reads files before editing them and explains each change.",` +
	`"tools":[{"type":"function","name":"read","parameters":{"type":"object","properties":{"path":{"type":"string"}}}}],` +
	`"input":"Fix the failing test in the parser package please."}`

// The simulator serves /v1/responses as vLLM does: a response with usage
// (the whole prompt in input_tokens), the second time with the prompt's
// blocks read from the cache, and a stream of named events ending with
// response.completed, which carries the usage.
func TestResponses(t *testing.T) {
	s := start(t, fast)
	status, _, body := post(t, s, "/v1/responses", responsesBody)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body)
	}
	var resp struct {
		ID, Object, Status string
		Output             []struct {
			Type    string
			Content []struct{ Type, Text string }
		}
	}
	if err := json.Unmarshal([]byte(body), &resp); err != nil || !strings.HasPrefix(resp.ID, "resp_") || resp.Object != "response" ||
		len(resp.Output) != 1 || resp.Output[0].Content[0].Text == "" {
		t.Fatalf("response %s: %v", body, err)
	}
	if resp.Status != "incomplete" {
		t.Errorf("status %q: max_output_tokens cut the answer", resp.Status)
	}
	first, ok := responses.FindUsage([]byte(body))
	if !ok || first.CompletionTokens != 8 || first.PromptTokens == 0 || !first.Details || first.CachedTokens != 0 {
		t.Fatalf("first usage %+v in %s", first, body)
	}
	if responses.ID([]byte(body)) != resp.ID {
		t.Errorf("ID reads %q, want %q", responses.ID([]byte(body)), resp.ID)
	}
	// Streamed, the same prompt again: its full blocks are cached.
	_, _, raw := post(t, s, "/v1/responses", strings.Replace(responsesBody, `"max_output_tokens":8,`, `"max_output_tokens":8,"stream":true,`, 1))
	events := strings.Split(strings.TrimSuffix(raw, "\n\n"), "\n\n")
	if len(events) < 8 || !strings.HasPrefix(events[0], "event: response.created\n") || !strings.HasPrefix(events[len(events)-1], "event: response.completed\n") {
		t.Fatalf("events: %q", events)
	}
	for i, ev := range events {
		name, data, _ := strings.Cut(strings.TrimPrefix(ev, "event: "), "\ndata: ")
		var v struct {
			Type string
			Seq  int `json:"sequence_number"`
		}
		if err := json.Unmarshal([]byte(data), &v); err != nil || v.Type != name || v.Seq != i {
			t.Fatalf("event %d %q: type %q seq %d (%v)", i, name, v.Type, v.Seq, err)
		}
	}
	if id := responses.ID([]byte(raw)); !strings.HasPrefix(id, "resp_") || id == resp.ID {
		t.Errorf("stream id %q", id)
	}
	_, data, _ := strings.Cut(events[len(events)-1], "data: ")
	final, u, found := responses.Final([]byte(data), true)
	want := openai.Usage{PromptTokens: first.PromptTokens, CompletionTokens: 8, CachedTokens: first.PromptTokens / 16 * 16, Details: true}
	if !final || !found || u != want {
		t.Errorf("final %v usage %+v, want %+v", final, u, want)
	}
}

// previous_response_id continues a stored response: the prompt is the
// stored conversation, its answer, then the new input; an unknown id is
// vLLM's 404.
func TestResponsesPrevious(t *testing.T) {
	s := start(t, fast)
	_, _, body := post(t, s, "/v1/responses", responsesBody)
	id := responses.ID([]byte(body))
	first, _ := responses.FindUsage([]byte(body))
	next := `{"model":"` + DefaultOptions().Model + `","max_output_tokens":4,"previous_response_id":"` + id + `","input":"And the lexer?"}`
	status, _, body2 := post(t, s, "/v1/responses", next)
	if status != 200 {
		t.Fatalf("status %d: %s", status, body2)
	}
	u, _ := responses.FindUsage([]byte(body2))
	// The instructions do not carry over, but the conversation and the
	// answer do: a longer prompt than the first.
	if u.PromptTokens <= first.PromptTokens-20 || u.PromptTokens < 20 {
		t.Errorf("continued prompt %d tokens after %d", u.PromptTokens, first.PromptTokens)
	}
	if !strings.Contains(body2, `"previous_response_id":"`+id+`"`) {
		t.Errorf("previous_response_id not echoed: %s", body2)
	}
	// GET /v1/responses/{id} answers the stored response.
	resp, err := client().Get(s.URL() + "/v1/responses/" + id)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(got) != body {
		t.Errorf("GET the stored response: %d %s, want %s", resp.StatusCode, got, body)
	}
	if resp, err := client().Get(s.URL() + "/v1/responses/resp_nope"); err != nil || resp.StatusCode != 404 {
		t.Errorf("GET an unknown response: %v %v", resp, err)
	} else {
		resp.Body.Close()
	}
	// POST /v1/responses/{id}/cancel: vLLM cancels only a background
	// response still running; a finished one is a 400, an unknown id a 404.
	if status, _, got := post(t, s, "/v1/responses/"+id+"/cancel", ""); status != 400 ||
		!strings.Contains(string(got), `"message":"Cannot cancel a synchronous response."`) {
		t.Errorf("cancel a finished response: %d %s", status, got)
	}
	if status, _, got := post(t, s, "/v1/responses/resp_nope/cancel", ""); status != 404 ||
		!strings.Contains(string(got), "Response with id 'resp_nope' not found.") {
		t.Errorf("cancel an unknown response: %d %s", status, got)
	}
	status, _, body3 := post(t, s, "/v1/responses", strings.Replace(next, id, "resp_nope", 1))
	if status != 404 || !strings.Contains(body3, "Response with id 'resp_nope' not found.") {
		t.Errorf("unknown id: %d %s", status, body3)
	}
	// store: false keeps nothing.
	_, _, body4 := post(t, s, "/v1/responses", strings.Replace(responsesBody, `"max_output_tokens":8,`, `"max_output_tokens":8,"store":false,`, 1))
	status, _, _ = post(t, s, "/v1/responses", strings.Replace(next, id, responses.ID([]byte(body4)), 1))
	if status != 404 {
		t.Errorf("a response sent with store false was stored: %d", status)
	}
	if status, _, _ := post(t, s, "/v1/responses", `{"model":"`+DefaultOptions().Model+`"}`); status != 400 {
		t.Errorf("no input: %d", status)
	}
}

// reasoning is echoed as vLLM echoes it (openai's Reasoning dumped: effort,
// generate_summary, summary), null without it; an effort vLLM does not
// know is its 400.
func TestResponsesReasoning(t *testing.T) {
	s := start(t, fast)
	body := strings.Replace(responsesBody, `"max_output_tokens":8,`, `"max_output_tokens":8,"reasoning":{"effort":"low","summary":"auto"},`, 1)
	status, _, got := post(t, s, "/v1/responses", body)
	if status != 200 || !strings.Contains(got, `"reasoning":{"effort":"low","generate_summary":null,"summary":"auto"}`) {
		t.Fatalf("%d %s", status, got)
	}
	if status, _, got := post(t, s, "/v1/responses", strings.Replace(responsesBody, `"max_output_tokens":8,`, `"reasoning":{"effort":"max"},`, 1)); status != 400 {
		t.Errorf("an effort vLLM refuses: %d %s", status, got)
	}
	if _, _, got := post(t, s, "/v1/responses", responsesBody); !strings.Contains(got, `"reasoning":null`) {
		t.Errorf("no reasoning: %s", got)
	}
}

// A background response (background true) is answered at once, queued;
// GET /v1/responses/{id} polls it until it has finished, with its output
// and usage, and cancel then refuses it (vLLM cancels only a response
// still running). One cancelled while running is answered and stored
// cancelled, and its run is stopped.
func TestResponsesBackground(t *testing.T) {
	get := func(s *Server, id string) string {
		t.Helper()
		resp, err := client().Get(s.URL() + "/v1/responses/" + id)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
	s := start(t, fast)
	bg := strings.Replace(responsesBody, `"max_output_tokens":8,`, `"max_output_tokens":8,"background":true,`, 1)
	status, _, body := post(t, s, "/v1/responses", bg)
	if status != 200 || !strings.Contains(body, `"status":"queued"`) || !strings.Contains(body, `"background":true`) ||
		!strings.Contains(body, `"output":[]`) || !strings.Contains(body, `"usage":null`) {
		t.Fatalf("%d %s", status, body)
	}
	id := responses.ID([]byte(body))
	deadline := time.Now().Add(5 * time.Second)
	for got := get(s, id); !strings.Contains(got, `"status":"incomplete"`); got = get(s, id) {
		if time.Now().After(deadline) {
			t.Fatalf("not finished: %s", got)
		}
		time.Sleep(5 * time.Millisecond)
	}
	if u, ok := responses.FindUsage([]byte(get(s, id))); !ok || u.CompletionTokens != 8 {
		t.Errorf("finished usage %+v", u)
	}
	if status, _, got := post(t, s, "/v1/responses/"+id+"/cancel", ""); status != 400 {
		t.Errorf("cancel a finished background response: %d %s", status, got)
	}
	if status, _, got := post(t, s, "/v1/responses", strings.Replace(bg, `"background":true,`, `"background":true,"stream":true,`, 1)); status != 400 {
		t.Errorf("background with stream: %d %s", status, got)
	}

	slow := start(t, nil) // real timing: a long answer takes a while
	long := strings.Replace(bg, `"max_output_tokens":8,`, `"max_output_tokens":4000,`, 1)
	status, _, body = post(t, slow, "/v1/responses", long)
	if status != 200 {
		t.Fatalf("%d %s", status, body)
	}
	id = responses.ID([]byte(body))
	status, _, got := post(t, slow, "/v1/responses/"+id+"/cancel", "")
	if status != 200 || !strings.Contains(got, `"status":"cancelled"`) || responses.ID([]byte(got)) != id {
		t.Fatalf("cancel while running: %d %s", status, got)
	}
	if got := get(slow, id); !strings.Contains(got, `"status":"cancelled"`) {
		t.Errorf("stored after cancel: %s", got)
	}
	if status, _, _ := post(t, slow, "/v1/responses/"+id+"/cancel", ""); status != 400 {
		t.Errorf("cancel twice: %d", status)
	}
}
