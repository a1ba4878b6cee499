package sim

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferrail/inferrail/model/responses"
	"github.com/inferrail/inferrail/model/wirefix"
)

// TestWireParity compares the simulator's Responses and embeddings
// writers, given the inputs of testdata/wire_*.txt (ids and times fixed),
// with those fixtures, made by testdata/gen_fixtures.py from vLLM's and
// the openai package's pydantic models.
func TestWireParity(t *testing.T) {
	const (
		qwen = "Qwen/Qwen3-8B"
		html = "<b>Tom & Jerry</b> \u2014 \u201cquoted\u201d\nline\u2028sep\tend \\ \"q\" \x01\x7f caf\u00e9 \U0001F600"
	)
	call := func(req *responses.Request, maxOut int) *responseCall {
		return &responseCall{req: req, id: "resp_0123456789abcdef0123456789abcdef", created: 1753106400, maxOut: maxOut}
	}
	prompt := func(n int) *request { return &request{model: qwen, prompt: make([]uint32, n)} }
	incomplete := &responses.Request{Instructions: "Be <brief> & kind.", PreviousResponseID: "resp_fedcba9876543210fedcba9876543210",
		Reasoning: json.RawMessage(`{"effort":"low","summary":"auto"}`), User: "u-1"}
	tools := []json.RawMessage{
		json.RawMessage(`{"type": "function", "name": "read", "description": "Read a file <path> & say \u00e9",
			"parameters": {"type": "object", "properties": {"path": {"type": "string", "maxLength": 1.5e3}}, "required": ["path"]}}`),
		json.RawMessage(`{"type":"function","name":"ls","parameters":{"type":"object"},"strict":true}`),
	}
	stream := func() []byte {
		c, r := call(&responses.Request{}, 8), prompt(40)
		ev := &responseEvents{call: c, r: r}
		b := ev.start(nil)
		pieces := []string{"Hi", " \u201cthere\u201d", " <3"}
		for _, p := range pieces {
			b = ev.delta(b, p)
		}
		text := strings.Join(pieces, "")
		return ev.finish(b, text, c.appendResponse(nil, r, "completed", text, len(pieces), 16, true))
	}
	vec := [embeddingDims]float64{0.123, -1, 0, 0.5, -0.999, 0.001, 0.25, -0.333}
	var rev [embeddingDims]float64
	for i, v := range vec {
		rev[embeddingDims-1-i] = v
	}
	const embdID, created = "embd-5c0ffee5c0ffee00", int64(1753106400)
	cases := map[string][]byte{
		"wire_response.txt":            call(&responses.Request{}, 8).appendResponse(nil, prompt(40), "completed", "Hello there.", 3, 0, true),
		"wire_response_incomplete.txt": call(incomplete, 8).appendResponse(nil, prompt(1200), "incomplete", html, 8, 1184, true),
		"wire_response_tools.txt":      call(&responses.Request{Tools: tools}, 8).appendResponse(nil, prompt(60), "completed", "ok", 1, 0, true),
		"wire_response_queued.txt":     call(&responses.Request{Background: true}, 32728).appendResponse(nil, prompt(40), "queued", "", 0, 0, false),
		"wire_response_stream.txt":     stream(),
		"wire_embeddings.txt":          appendEmbeddings(nil, embdID, created, qwen, [][embeddingDims]float64{vec}, false, 5),
		"wire_embeddings_base64.txt":   appendEmbeddings(nil, embdID, created, qwen, [][embeddingDims]float64{vec, rev}, true, 9),
	}
	files, err := filepath.Glob(filepath.Join("testdata", "wire_*.txt"))
	if err != nil || len(files) != len(cases) {
		t.Errorf("testdata has %d wire fixtures, the test %d (%v)", len(files), len(cases), err)
	}
	for name, got := range cases {
		if want := fixture(t, name); !bytes.Equal(got, want) {
			t.Errorf("%s:\n got %s\nwant %s", name, got, want)
		}
	}
}

// fixture returns testdata/name's expected bytes.
func fixture(t *testing.T, name string) []byte { return wirefix.Read(t, os.DirFS("testdata"), name) }
