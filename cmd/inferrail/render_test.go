package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"golang.org/x/text/unicode/norm"

	"github.com/inferrail/inferrail/model/openai"
	"github.com/inferrail/inferrail/model/token"
	"github.com/inferrail/inferrail/sim"
)

// simFleet starts three simulators behind a gateway whose model has the
// builtin:sim tokenizer, waits for the engines' cards, and returns the
// gateway's address and one engine's URL.
func simFleet(t *testing.T) (addr, engine string) {
	t.Helper()
	opts := sim.DefaultOptions()
	opts.Port = 0
	opts.Engine.Latency.Zero = true
	cfg := costModelFleet(t, opts)
	addr, _ = startGateway(t, cfg)
	cardsRead(t, addr)
	return addr, cfg.Replicas[0].URL
}

// requestID matches the request_id of a render answer, which vLLM draws at
// random for every request.
var requestID = regexp.MustCompile(`"request_id":"(chatcmpl|cmpl)-[0-9a-f]{16}(-[0-9]+)?"`)

// forwarded is body as the gateway sends it on: its model member set to
// the served name (inserted when absent); a body that is not an object as
// it is.
func forwarded(body string) string {
	f, err := openai.FindModel([]byte(body))
	if err != nil {
		return body
	}
	return string(openai.SpliceModel(nil, []byte(body), f, sim.DefaultOptions().Model))
}

func sameAnswer(got, want string) bool {
	return requestID.ReplaceAllString(got, `"request_id":"$1-$2"`) == requestID.ReplaceAllString(want, `"request_id":"$1-$2"`)
}

// isError reports whether body is an error in OpenAI's shape.
func isError(body string) bool {
	var e struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    int    `json:"code"`
		} `json:"error"`
	}
	return json.Unmarshal([]byte(body), &e) == nil && e.Error.Message != "" && e.Error.Type != "" && e.Error.Code >= 400
}

// TestDetokenizeAnswered: for a model with a tokenizer, POST /detokenize
// is answered by the gateway itself, byte for byte as the engine answers
// the same body; a body vLLM refuses goes to a replica, whose error in
// OpenAI's shape is the answer.
func TestDetokenizeAnswered(t *testing.T) {
	addr, engine := simFleet(t)
	chat := token.RenderSimChat([]token.Message{{Role: "user", Content: token.Generate(7, 12)}}, true)
	ids, _ := json.Marshal(token.Sim{}.Encode(nil, chat))
	for _, body := range []string{
		`{"model":"sim","tokens":` + string(ids) + `}`,
		`{"tokens":` + string(ids) + `,"extra":1}`,
		`{"model":"sim","tokens":[]}`,
		`{"model":"sim","tokens":[1,300,31999,32000,"7",true]}`,
	} {
		code, replica, got := postRaw(t, "http://"+addr+"/detokenize", body)
		wcode, _, want := postRaw(t, engine+"/detokenize", forwarded(body))
		if code != 200 || wcode != 200 || got != want || replica != "" {
			t.Errorf("%s:\n gateway %d (replica %q) %s\n engine  %d %s", body, code, replica, got, wcode, want)
		}
	}
	if _, _, got := postRaw(t, "http://"+addr+"/detokenize", `{"model":"sim","tokens":`+string(ids)+`}`); got != string(openai.AppendDetokenize(nil, chat)) {
		t.Errorf("the chat does not decode to itself: %s", got)
	}
	for _, body := range []string{
		`{"model":"sim"}`,
		`{"model":"sim","tokens":[-1]}`,
		`{"model":"sim","tokens":"1 2"}`,
		`{"model":"sim","tokens":[1.5]}`,
		`{"model":"sim","tokens":[9223372036854775808]}`,
		`{"model":"sim","tokens":[4294967296]}`,
	} {
		code, replica, got := postRaw(t, "http://"+addr+"/detokenize", body)
		wcode, _, want := postRaw(t, engine+"/detokenize", forwarded(body))
		if replica == "" || code != wcode || got != want {
			t.Errorf("%s:\n gateway %d (replica %q) %s\n engine  %d %s", body, code, replica, got, wcode, want)
		}
		if body != `{"model":"sim","tokens":[4294967296]}` && (code != 400 || !isError(got)) {
			t.Errorf("%s: %d %s, want a 400 in OpenAI's shape", body, code, got)
		}
	}
	// The gateway's own refusals: a body that is not an object, a model it
	// does not serve.
	for _, body := range []string{`[1,2]`, `{"model":"sim","tokens":[1,`, `{"model":"nope","tokens":[1]}`} {
		if code, _, got := postRaw(t, "http://"+addr+"/detokenize", body); code/100 != 4 || !isError(got) {
			t.Errorf("%s: %d %s, want an error in OpenAI's shape", body, code, got)
		}
	}
}

// TestRenderAnswered: for a model with a tokenizer, the render endpoints
// are answered by the gateway itself, as the engine answers the same body
// but for the request_id both draw at random; what the gateway does not
// reproduce goes to a replica, and the engine's errors come in OpenAI's
// shape.
func TestRenderAnswered(t *testing.T) {
	addr, engine := simFleet(t)
	const msgs = `"messages":[{"role":"system","content":"Be brief."},{"role":"user","content":"What is a KV cache?"}]`
	for _, c := range []struct{ path, body string }{
		{"/v1/chat/completions/render", `{"model":"sim",` + msgs + `}`},
		{"/v1/chat/completions/render", `{` + msgs + `,"max_tokens":50,"cache_salt":"tenant-a"}`},
		{"/v1/chat/completions/render", `{"model":"sim",` + msgs + `,"max_completion_tokens":9,"max_tokens":70}`},
		{"/v1/chat/completions/render", `{"model":"sim",` + msgs + `,"stream":true,"stream_options":{"include_usage":true}}`},
		{"/v1/chat/completions/render", `{"model":"sim",` + msgs + `,"add_generation_prompt":false,"user":"u1"}`},
		{"/v1/chat/completions/render", `{"model":"sim",` + msgs + `,"add_generation_prompt":false,"continue_final_message":true,"priority":0}`},
		{"/v1/completions/render", `{"model":"sim","prompt":"Once upon a time there was a router"}`},
		{"/v1/completions/render", `{"model":"sim","prompt":[5,6,7,40000],"max_tokens":100,"stream":true}`},
		{"/v1/completions/render", `{"model":"sim","prompt":["one prompt"],"max_tokens":16}`},
	} {
		code, replica, got := postRaw(t, "http://"+addr+c.path, c.body)
		wcode, _, want := postRaw(t, engine+c.path, forwarded(c.body))
		if code != 200 || wcode != 200 || replica != "" || !sameAnswer(got, want) {
			t.Errorf("%s %s:\n gateway %d (replica %q) %s\n engine  %d %s", c.path, c.body, code, replica, got, wcode, want)
		}
		if !requestID.MatchString(got) || !strings.Contains(got, `"token_ids":[`) {
			t.Errorf("%s %s: not a GenerateRequest: %s", c.path, c.body, got)
		}
	}
	// The prompt's ids are the ones the gateway predicts the request with.
	_, _, got := postRaw(t, "http://"+addr+"/v1/completions/render", `{"model":"sim","prompt":"hello world"}`)
	ids, _ := json.Marshal(token.Sim{}.Encode(nil, "hello world"))
	if !strings.Contains(got, `"token_ids":`+string(ids)+`,`) || !strings.HasPrefix(got, "[{") {
		t.Errorf("completion render: %s, want the ids %s in a list", got, ids)
	}
	// Bodies the gateway leaves to the engine; errors come in OpenAI's shape.
	for _, c := range []struct {
		path, body string
		code       int
	}{
		{"/v1/chat/completions/render", `{"model":"sim",` + msgs + `,"temperature":0.5}`, 200},
		{"/v1/chat/completions/render", `{"model":"sim",` + msgs + `,"priority":3}`, 200},
		{"/v1/chat/completions/render", `{"model":"sim",` + msgs + `,"max_tokens":0}`, 400},
		{"/v1/chat/completions/render", `{"model":"sim",` + msgs + `,"max_tokens":1000000}`, 400},
		{"/v1/chat/completions/render", `{"model":"sim","messages":"hi"}`, 400},
		{"/v1/chat/completions/render", `{"model":"sim",` + msgs + `,"stream_options":{"include_usage":true}}`, 400},
		{"/v1/completions/render", `{"model":"sim","prompt":""}`, 400},
		{"/v1/completions/render", `{"model":"sim","prompt":[-1]}`, 400},
		{"/v1/completions/render", `{"model":"sim","prompt":["a","b"]}`, 200}, // a batch: one GenerateRequest per prompt, from the engine
		{"/v1/completions/render", `{"model":"sim","prompt":"x","n":1}`, 200},
	} {
		code, replica, got := postRaw(t, "http://"+addr+c.path, c.body)
		wcode, _, want := postRaw(t, engine+c.path, forwarded(c.body))
		if replica == "" || code != c.code || wcode != c.code || !sameAnswer(got, want) {
			t.Errorf("%s %s:\n gateway %d (replica %q) %s\n engine  %d %s", c.path, c.body, code, replica, got, wcode, want)
		}
		if c.code != 200 && !isError(got) {
			t.Errorf("%s %s: %s is not an error in OpenAI's shape", c.path, c.body, got)
		}
	}
	for _, path := range []string{"/v1/chat/completions/render", "/v1/completions/render"} {
		for _, body := range []string{`{"model":"nope","prompt":"x","messages":[]}`, `not json`} {
			if code, _, got := postRaw(t, "http://"+addr+path, body); code/100 != 4 || !isError(got) {
				t.Errorf("%s %s: %d %s, want an error in OpenAI's shape", path, body, code, got)
			}
		}
	}
}

// TestRenderWithoutTokenizer: a model the gateway has no tokenizer for has
// /detokenize and the render endpoints answered by a replica, a token-id
// prompt too.
func TestRenderWithoutTokenizer(t *testing.T) {
	addr := tokenIDFleet(t)
	cardsRead(t, addr)
	for _, c := range []struct{ path, body, prefix string }{
		{"/detokenize", `{"model":"sim","tokens":[300,301]}`, `{"prompt":`},
		{"/v1/chat/completions/render", `{"model":"sim","messages":[{"role":"user","content":"hi"}]}`, `{"request_id":"chatcmpl-`},
		{"/v1/completions/render", `{"model":"sim","prompt":[1,2,3]}`, `[{"request_id":"cmpl-`},
	} {
		code, replica, got := postRaw(t, "http://"+addr+c.path, c.body)
		if code != 200 || replica == "" || !strings.HasPrefix(got, c.prefix) {
			t.Errorf("%s: %d (replica %q) %s", c.path, code, replica, got)
		}
	}
}

// TestDetokenizeGoldens: the gateway's /detokenize answers for Qwen3 are
// vLLM's, tokenizer.decode(ids) with special tokens kept and no clean-up
// (the fixture's tokenizer_config sets clean_up_tokenization_spaces false),
// on every chat and text golden: the ids of the rendered prompt decode to
// the rendered prompt, and a text's ids to the text, NFC-normalized as the
// tokenizer's normalizer left it (see model/token/hf/testdata/README.md for
// how the goldens were made).
func TestDetokenizeGoldens(t *testing.T) {
	addr := fleetWith(t, "../../model/token/hf/testdata/qwen3")
	cardsRead(t, addr)
	n := 0
	for _, g := range qwenGoldens(t) {
		text := g.Rendered
		if text == nil {
			text = g.Text
		}
		body, _ := json.Marshal(map[string]any{"model": "sim", "tokens": g.IDs})
		code, replica, got := postRaw(t, "http://"+addr+"/detokenize", string(body))
		want := string(openai.AppendDetokenize(nil, norm.NFC.String(*text)))
		if code != 200 || replica != "" || got != want {
			t.Errorf("%s: %d (replica %q)\n got  %.300s\n want %.300s", g.ID, code, replica, got, want)
		}
		n++
	}
	if n < 300 {
		t.Fatalf("only %d goldens", n)
	}
}

// TestRenderGoldens: the gateway's /v1/chat/completions/render answers for
// Qwen3 carry the fixture goldens' token ids, on every chat golden as a
// chat body (the one keeping a tool call's arguments as a string left out,
// as in TestTokenizeGoldens), and /v1/completions/render those of every
// text golden but the empty one, which is refused; the rest of the answer
// is vLLM's GenerateRequest for them.
func TestRenderGoldens(t *testing.T) {
	addr := fleetWith(t, "../../model/token/hf/testdata/qwen3")
	cardsRead(t, addr)
	limit := sim.DefaultOptions().Engine.MaxModelLen
	n := 0
	for _, g := range qwenGoldens(t) {
		if strings.HasSuffix(g.ID, "tool-call-string-args") {
			continue
		}
		path := "/v1/chat/completions/render"
		if g.Text != nil {
			path = "/v1/completions/render"
		}
		code, replica, got := postRaw(t, "http://"+addr+path, g.body())
		if len(g.IDs) == 0 {
			// An empty prompt: vLLM refuses to render it, and so does the engine.
			if code != 400 || !isError(got) {
				t.Errorf("%s: %d %s, want a 400", g.ID, code, got)
			}
			continue
		}
		r := openai.Render{RequestID: "cmpl-0000000000000000", TokenIDs: g.IDs, MaxTokens: 16,
			Model: sim.DefaultOptions().Model, ModelSet: true}
		want := string(openai.AppendRenderList(nil, []openai.Render{r}))
		if g.Text == nil {
			r.RequestID, r.MaxTokens = "chatcmpl-0000000000000000", limit-len(g.IDs)
			want = string(openai.AppendRender(nil, &r))
		}
		if code != 200 || replica != "" || !sameAnswer(got, want) {
			t.Errorf("%s: %d (replica %q)\n got  %.300s\n want %.300s", g.ID, code, replica, got, want)
		}
		n++
	}
	if n < 300 {
		t.Fatalf("only %d goldens", n)
	}
}

// TestRenderWithGenerationConfig: a model directory holding a
// generation_config.json has its render requests sent to an engine (vLLM
// puts those sampling defaults in the answer, and the gateway does not),
// while /detokenize is still answered by the gateway.
func TestRenderWithGenerationConfig(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"tokenizer.json", "tokenizer_config.json"} {
		b, err := os.ReadFile("../../model/token/hf/testdata/qwen3/" + name)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "generation_config.json"), []byte(`{"temperature":0.6,"top_k":20,"top_p":0.95}`), 0o644); err != nil {
		t.Fatal(err)
	}
	addr := fleetWith(t, dir)
	cardsRead(t, addr)
	if _, replica, got := postRaw(t, "http://"+addr+"/v1/chat/completions/render", `{"model":"sim","messages":[{"role":"user","content":"hi"}]}`); replica == "" {
		t.Errorf("render answered by the gateway: %s", got)
	}
	if code, replica, got := postRaw(t, "http://"+addr+"/detokenize", `{"model":"sim","tokens":[9707,11]}`); code != 200 || replica != "" || got != `{"prompt":"Hello,"}` {
		t.Errorf("detokenize: %d (replica %q) %s", code, replica, got)
	}
}
