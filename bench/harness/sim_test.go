package harness

import (
	"bytes"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	"github.com/inferrail/inferrail/bench/loadgen"
	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/sim/workload"
)

// The simulator computes exactly the token ids the workloads' encoder
// (and so the virtual-time fleet) computes, and answers with exactly the
// text workload.Answer predicts, which conversations and agent loops
// resend.
func TestSimulatorAgreesWithWorkloads(t *testing.T) {
	opts := sim.DefaultOptions()
	opts.Port, opts.Engine.Latency.Zero = 0, true
	s, err := sim.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	post := func(path string, body map[string]any, out any) {
		t.Helper()
		b, _ := json.Marshal(body)
		resp, err := http.Post(s.URL()+path, "application/json", bytes.NewReader(b))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%s: status %d", path, resp.StatusCode)
		}
		if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
			t.Fatal(err)
		}
	}
	gpt := workload.W2()
	gpt.ShareGPT = "../../sim/workload/testdata/sharegpt.json"
	if err := gpt.Load(); err != nil {
		t.Fatal(err)
	}
	tr, err := workload.LoadTrace("../../sim/workload/testdata/mooncake_first300.jsonl", workload.TraceOptions{Limit: 6})
	if err != nil {
		t.Fatal(err)
	}
	ws := []workload.Workload{&gpt, tr}
	for _, k := range workload.Kinds() {
		w, _ := workload.New(k)
		ws = append(ws, w)
	}
	enc := workload.NewEncoder()
	for _, w := range ws {
		src := w.Start(9, 20)
		for range 6 {
			r := src.Next()
			if r.IsMessages() {
				messagesAgree(t, s.URL(), opts.Model, enc, &r)
				continue
			}
			body := map[string]any{"model": opts.Model, "max_tokens": r.MaxTokens}
			if r.Chat() {
				var msgs []map[string]string
				for _, m := range r.Messages {
					msgs = append(msgs, map[string]string{"role": m.Role, "content": m.Content})
				}
				body["messages"] = msgs
			} else if len(r.Tokens) > 0 {
				body["prompt"] = r.Tokens
			} else {
				body["prompt"] = r.Prompt
			}
			// The body the harness sends says the same.
			var sent struct {
				Messages  []map[string]string
				Prompt    json.RawMessage
				MaxTokens int `json:"max_tokens"`
			}
			if err := json.Unmarshal(AppendBody(nil, opts.Model, &r), &sent); err != nil {
				t.Fatal(err)
			}
			prompt, _ := json.Marshal(body["prompt"])
			if r.Chat() {
				prompt = nil
			}
			if sent.MaxTokens != r.MaxTokens || !bytes.Equal(sent.Prompt, prompt) || len(sent.Messages) != len(r.Messages) {
				t.Fatalf("%s: the body says %d max_tokens, %d messages", w.Name(), sent.MaxTokens, len(sent.Messages))
			}
			for i, m := range r.Messages {
				if sent.Messages[i]["role"] != m.Role || sent.Messages[i]["content"] != m.Content {
					t.Fatalf("%s: message %d differs in the body", w.Name(), i)
				}
			}
			var tok struct{ Tokens []uint32 }
			post("/tokenize", body, &tok)
			ids := enc.Encode(nil, &r)
			if !slices.Equal(tok.Tokens, ids) {
				t.Fatalf("%s: the simulator tokenizes %d ids, the encoder %d", w.Name(), len(tok.Tokens), len(ids))
			}
			var out struct {
				Choices []struct {
					Text    string
					Message struct{ Content string }
				}
			}
			path := "/v1/completions"
			if r.Chat() {
				path = "/v1/chat/completions"
			}
			post(path, body, &out)
			got := out.Choices[0].Text + out.Choices[0].Message.Content
			if want := workload.Answer(ids, r.MaxTokens); got != want {
				t.Fatalf("%s: the simulator answers %q, workload.Answer %q", w.Name(), got[:min(len(got), 30)], want[:min(len(want), 30)])
			}
		}
	}
}

// messagesAgree checks an Anthropic request against the simulator: its
// count_tokens is the encoder's length, and its answer (through the body
// the harness sends, streamed) is workload.Answer, with the usage the
// harness reads.
func messagesAgree(t *testing.T, url, model string, enc *workload.Encoder, r *workload.Request) {
	t.Helper()
	ids := enc.Encode(nil, r)
	resp, err := http.Post(url+"/v1/messages/count_tokens", "application/json",
		bytes.NewReader(workload.AppendMessagesBody(nil, model, r, false)))
	if err != nil {
		t.Fatal(err)
	}
	var count struct {
		InputTokens int `json:"input_tokens"`
	}
	err = json.NewDecoder(resp.Body).Decode(&count)
	resp.Body.Close()
	if err != nil || count.InputTokens != len(ids) {
		t.Fatalf("%s: the simulator counts %d tokens (%v), the encoder %d", r.Class, count.InputTokens, err, len(ids))
	}
	resp, err = http.Post(url+"/v1/messages", "application/json", bytes.NewReader(AppendBody(nil, model, r)))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var text strings.Builder
	sr := loadgen.NewSSEReader(resp.Body)
	for {
		_, data, err := sr.Next()
		if err != nil {
			break
		}
		var ev struct {
			Delta struct{ Text string } `json:"delta"`
		}
		if json.Unmarshal(data, &ev) == nil {
			text.WriteString(ev.Delta.Text)
		}
	}
	if want := workload.Answer(ids, r.MaxTokens); text.String() != want {
		t.Fatalf("%s: the simulator answers %q, workload.Answer %q", r.Class, text.String()[:min(text.Len(), 30)], want[:min(len(want), 30)])
	}
}
