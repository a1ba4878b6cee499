package main

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/sim"
)

// tokenIDFleet is costModelFleet for a model configured without a
// tokenizer: only prompts given as token ids can be predicted.
func tokenIDFleet(t *testing.T) string { return fleetWith(t, "") }

// fleetWith starts three zero-latency simulators reporting cached tokens
// and a gateway on cost_model in front of them, the model's tokenizer set
// to tokenizer, and returns the gateway's address.
func fleetWith(t *testing.T, tokenizer string) string {
	t.Helper()
	opts := sim.DefaultOptions()
	opts.Port = 0
	opts.EnablePromptTokensDetails = true
	opts.Engine.Latency.Zero = true
	cfg := costModelFleet(t, opts)
	cfg.Models[0].Tokenizer = tokenizer
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	addr, _ := startGateway(t, cfg)
	return addr
}

// answer is what one completion through the gateway showed.
type answer struct {
	status            int
	replica           string
	predicted, header int // x-inferrail-cached-tokens, x-inferrail-prompt-tokens; -1 when absent
	prompt, cached    int // the engine's usage
	body              string
}

func completeIDs(t *testing.T, addr string, body any) answer {
	t.Helper()
	b, _ := json.Marshal(body)
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Post("http://"+addr+"/v1/completions", "application/json", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	a := answer{status: resp.StatusCode, replica: resp.Header.Get("X-Inferrail-Replica"), predicted: -1, header: -1}
	raw, _ := io.ReadAll(resp.Body)
	a.body = string(raw)
	if h := resp.Header.Get("X-Inferrail-Cached-Tokens"); h != "" {
		a.predicted, _ = strconv.Atoi(h)
	}
	if h := resp.Header.Get("X-Inferrail-Prompt-Tokens"); h != "" {
		a.header, _ = strconv.Atoi(h)
	}
	if a.status == 200 {
		a.prompt, a.cached, _ = usageOf(false, raw)
	}
	return a
}

// TestTokenIDPromptRouting: for a model the gateway has no tokenizer for,
// a completion whose prompt is token ids is still routed on its blocks:
// a second request sharing a long prefix of ids goes to the replica that
// holds it, the gateway predicts exactly the engine's cached tokens, and
// x-inferrail-prompt-tokens is the number of ids. A text prompt to that
// model gets no prediction.
func TestTokenIDPromptRouting(t *testing.T) {
	addr := tokenIDFleet(t)
	shared := make([]int, 200)
	for i := range shared {
		shared[i] = 1000 + 7*i
	}
	ask := func(tail ...int) answer {
		ids := append(append([]int(nil), shared...), tail...)
		a := completeIDs(t, addr, map[string]any{"model": "sim", "prompt": ids, "max_tokens": 2})
		if a.status != 200 {
			t.Fatalf("%d %s", a.status, a.body)
		}
		return a
	}
	first := ask(1, 2, 3)
	if first.predicted != 0 || first.cached != 0 || first.header != 203 || first.prompt != 203 {
		t.Fatalf("first: %+v", first)
	}
	for i := range 4 {
		a := ask(10+i, 20+i)
		if a.replica != first.replica {
			t.Fatalf("request %d went to %s, the prefix is on %s", i, a.replica, first.replica)
		}
		if a.predicted != a.cached || a.cached != 192 || a.header != 202 || a.prompt != 202 {
			t.Fatalf("request %d: predicted %d, engine cached %d (want 192 of 12 blocks), prompt %d/%d",
				i, a.predicted, a.cached, a.header, a.prompt)
		}
	}
	text := completeIDs(t, addr, map[string]any{"model": "sim", "prompt": "some words of text", "max_tokens": 2})
	if text.status != 200 || text.predicted != -1 || text.header != -1 {
		t.Fatalf("text prompt without a tokenizer: %+v", text)
	}
}

// TestTokenIDBatchRouting: a batch of token-id prompts is routed on its
// first prompt, to the replica holding it, with no prediction and no
// prompt count, since the engine reports the whole batch's; it goes
// through, and the engine serves it as vLLM does: a choice per prompt,
// each with its prompt's index, and the usage of every prompt. A batch of
// text prompts goes through alike.
func TestTokenIDBatchRouting(t *testing.T) {
	addr := tokenIDFleet(t)
	shared := make([]int, 100)
	for i := range shared {
		shared[i] = 2000 + 3*i
	}
	first := completeIDs(t, addr, map[string]any{"model": "sim", "prompt": shared, "max_tokens": 2})
	if first.status != 200 || first.cached != 0 {
		t.Fatalf("first: %+v", first)
	}
	for i := range 4 {
		a := completeIDs(t, addr, map[string]any{"model": "sim", "prompt": [][]int{shared, {5, 6, 7, i}}, "max_tokens": 2})
		if a.replica != first.replica || a.predicted != -1 || a.header != -1 {
			t.Fatalf("batch %d: replica %s (prefix on %s), predicted %d, prompt tokens %d", i, a.replica, first.replica, a.predicted, a.header)
		}
		var r struct{ Choices []struct{ Index int } }
		if a.status != 200 || json.Unmarshal([]byte(a.body), &r) != nil || len(r.Choices) != 2 || r.Choices[1].Index != 1 {
			t.Fatalf("batch %d: %d %s", i, a.status, a.body)
		}
		if a.prompt != len(shared)+4 || a.cached < 96 {
			t.Fatalf("batch %d: the engine reports %d prompt tokens (want %d), %d cached (the first prompt's 96 at least)",
				i, a.prompt, len(shared)+4, a.cached)
		}
	}
	texts := completeIDs(t, addr, map[string]any{"model": "sim", "prompt": []string{"one batch", "of two prompts"}, "max_tokens": 2})
	var r struct{ Choices []struct{ Index int } }
	if texts.status != 200 || json.Unmarshal([]byte(texts.body), &r) != nil || len(r.Choices) != 2 {
		t.Fatalf("a batch of texts: %d %s", texts.status, texts.body)
	}
}

// TestTokenIDPromptErrors: prompts of a shape vLLM refuses get the
// gateway's own 400 in OpenAI's error shape, without reaching a replica.
func TestTokenIDPromptErrors(t *testing.T) {
	addr := tokenIDFleet(t)
	f := func(prompt string, want string) {
		t.Helper()
		a := completeIDs(t, addr, json.RawMessage(`{"model":"sim","max_tokens":2,"prompt":`+prompt+`}`))
		var e struct {
			Error struct {
				Message string `json:"message"`
				Code    int    `json:"code"`
			} `json:"error"`
		}
		if err := json.Unmarshal([]byte(a.body), &e); err != nil || a.status != 400 || e.Error.Code != 400 ||
			!strings.Contains(e.Error.Message, want) || a.replica != "" {
			t.Errorf("%s: %d %s (replica %q); want a 400 with %q", prompt, a.status, a.body, a.replica, want)
		}
	}
	f(`[]`, "The decoder prompt cannot be empty")
	f(`[[1,2],[]]`, "The decoder prompt cannot be empty")
	f(`[1,"a"]`, "body.prompt.1: Input should be a valid integer")
	f(`[3,-1]`, "greater than or equal to 0")
	f(`[2.5]`, "fractional part")
	f(`[[1],2]`, "body.prompt.0")
	// An id past the vocabulary is the engine's to refuse.
	a := completeIDs(t, addr, json.RawMessage(`{"model":"sim","max_tokens":2,"prompt":[1,99999]}`))
	if a.status != 400 || !strings.Contains(a.body, "Token id 99999 is out of vocabulary") || a.replica == "" {
		t.Errorf("out of vocabulary: %d %s (replica %q)", a.status, a.body, a.replica)
	}
}

// postRaw sends body to url and returns the status, the replica that served
// it ("" when the gateway answered itself) and the body.
func postRaw(t *testing.T, url, body string) (int, string, string) {
	t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header.Get("X-Inferrail-Replica"), string(b)
}

// cardsRead waits until the gateway's /v1/models carries an engine's card,
// the simulator's max_model_len in it (the gateway's own card has none).
func cardsRead(t *testing.T, addr string) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		resp, err := http.Get("http://" + addr + "/v1/models")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if bytes.Contains(b, []byte(`"max_model_len":`+strconv.Itoa(sim.DefaultOptions().Engine.MaxModelLen))) {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatal("no engine card on /v1/models")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestTokenizeAnswered: for a model with a tokenizer, POST /tokenize is
// answered by the gateway itself, byte for byte as the engine answers the
// same body (here the simulator, with the builtin:sim tokenizer), for
// prompts and chats; what it does not follow goes to a replica.
func TestTokenizeAnswered(t *testing.T) {
	opts := sim.DefaultOptions()
	opts.Port = 0
	opts.Engine.Latency.Zero = true
	cfg := costModelFleet(t, opts)
	engine := cfg.Replicas[0].URL
	addr, _ := startGateway(t, cfg)
	cardsRead(t, addr)
	for _, body := range []string{
		`{"model":"sim","prompt":"Once upon a time there was a router"}`,
		`{"prompt":"no model named, the only one served","add_special_tokens":false}`,
		`{"model":"sim","messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"What is a KV cache?"}]}`,
		`{"model":"sim","messages":[{"role":"user","content":"hi"}],"add_generation_prompt":false,"return_token_strs":false}`,
		`{"model":"sim","prompt":""}`, // no tokens, as vLLM's TokenizeCompletionRequest allows
	} {
		code, replica, got := postRaw(t, "http://"+addr+"/tokenize", body)
		wcode, _, want := postRaw(t, engine+"/tokenize", body)
		if code != wcode || got != want || replica != "" {
			t.Errorf("%s:\n gateway %d (replica %q) %s\n engine  %d %s", body, code, replica, got, wcode, want)
		}
		if !strings.HasPrefix(got, `{"count":`) || !strings.HasSuffix(got, `],"token_strs":null}`) {
			t.Errorf("%s: not a TokenizeResponse: %s", body, got)
		}
	}
	// Bodies the gateway leaves to the engine: the replica header says so.
	for _, body := range []string{
		`{"model":"sim","prompt":[1,2,3]}`,
		`{"model":"sim","prompt":"x","return_token_strs":true}`,
		`{"model":"sim","prompt":"x","messages":[]}`,
		`{"model":"sim","messages":[{"role":"user","content":"hi"}],"continue_final_message":true}`,
	} {
		if _, replica, got := postRaw(t, "http://"+addr+"/tokenize", body); replica == "" {
			t.Errorf("%s: answered by the gateway: %s", body, got)
		}
	}
	if code, _, got := postRaw(t, "http://"+addr+"/tokenize", `{"model":"nope","prompt":"x"}`); code != 404 {
		t.Errorf("unknown model: %d %s", code, got)
	}
}

// TestTokenizeWithoutTokenizer: a model the gateway has no tokenizer for
// has /tokenize answered by a replica.
func TestTokenizeWithoutTokenizer(t *testing.T) {
	addr := tokenIDFleet(t)
	cardsRead(t, addr)
	code, replica, got := postRaw(t, "http://"+addr+"/tokenize", `{"model":"sim","prompt":"hello there"}`)
	if code != 200 || replica == "" || !strings.HasPrefix(got, `{"count":`) {
		t.Fatalf("%d (replica %q) %s", code, replica, got)
	}
}

// TestTokenizeGoldens: the gateway's /tokenize answers for Qwen3 equal
// vLLM's answer built from the fixture goldens' token ids (generated with
// transformers by shared/fixtures/tokenizers, see
// model/token/hf/testdata/README.md): every chat golden as a
// TokenizeChatRequest and every text golden as a TokenizeCompletionRequest,
// max_model_len from the engines' cards. The chat golden that keeps a tool
// call's arguments as a string, which vLLM's own parsing would have turned
// into an object, is left out.
func TestTokenizeGoldens(t *testing.T) {
	addr := fleetWith(t, "../../model/token/hf/testdata/qwen3")
	cardsRead(t, addr)
	n := 0
	for _, g := range qwenGoldens(t) {
		if strings.HasSuffix(g.ID, "tool-call-string-args") {
			continue
		}
		code, replica, got := postRaw(t, "http://"+addr+"/tokenize", g.body())
		want := string(openai.AppendTokenize(nil, g.IDs, sim.DefaultOptions().Engine.MaxModelLen))
		if code != 200 || replica != "" || got != want {
			t.Errorf("%s: %d (replica %q)\n got  %.300s\n want %.300s", g.ID, code, replica, got, want)
		}
		n++
	}
	if n < 300 {
		t.Fatalf("only %d goldens", n)
	}
}

// qwenGolden is one line of the Qwen3 fixture goldens: a chat (messages,
// tools, add_generation_prompt, chat_template_kwargs, and the prompt
// transformers rendered) or a text (and add_special_tokens), with the ids
// transformers tokenized it to.
type qwenGolden struct {
	ID         string          `json:"id"`
	Messages   json.RawMessage `json:"messages"`
	Tools      json.RawMessage `json:"tools"`
	AddGen     *bool           `json:"add_generation_prompt"`
	Kwargs     json.RawMessage `json:"chat_template_kwargs"`
	Rendered   *string         `json:"rendered_prompt"`
	Text       *string         `json:"text"`
	AddSpecial *bool           `json:"add_special_tokens"`
	IDs        []uint32        `json:"token_ids"`
}

// body is the golden as a request for model sim: a chat body (messages,
// add_generation_prompt, tools, chat_template_kwargs) or a completion
// body (prompt, add_special_tokens), which /tokenize takes too.
func (g qwenGolden) body() string {
	req := map[string]any{"model": "sim"}
	if g.Text != nil {
		req["prompt"], req["add_special_tokens"] = *g.Text, *g.AddSpecial
	} else {
		req["messages"], req["add_generation_prompt"] = g.Messages, *g.AddGen
		if len(g.Tools) > 0 && string(g.Tools) != "null" {
			req["tools"] = g.Tools
		}
		if len(g.Kwargs) > 0 {
			req["chat_template_kwargs"] = g.Kwargs
		}
	}
	b, _ := json.Marshal(req)
	return string(b)
}

// qwenGoldens reads the chat goldens, then the text goldens.
func qwenGoldens(t *testing.T) []qwenGolden {
	t.Helper()
	var out []qwenGolden
	for _, file := range []string{"goldens.jsonl", "text_goldens.jsonl"} {
		raw, err := os.ReadFile("../../model/token/hf/testdata/qwen3/" + file)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range bytes.Split(bytes.TrimSpace(raw), []byte("\n")) {
			var g qwenGolden
			if err := json.Unmarshal(line, &g); err != nil {
				t.Fatal(err)
			}
			out = append(out, g)
		}
	}
	return out
}
