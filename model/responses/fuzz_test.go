package responses

import (
	"encoding/json"
	"testing"
)

// FuzzParse: any body is parsed or refused, never a panic; what parses
// converts into a JSON object (or ErrUnsupported / ErrHistory), whose
// messages are a list; the usage, end and id readers take any bytes.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","instructions":"S","input":"hi","tools":[{"type":"function","name":"n","parameters":{},"strict":false}]}`,
		`{"input":[{"type":"message","role":"user","content":[{"type":"input_text","text":"a"},{"type":"input_image","image_url":"u"}]},{"type":"function_call","call_id":"c","name":"n","arguments":"{}"},{"type":"function_call_output","call_id":"c","output":[{"type":"input_text","text":"o"}]},{"type":"reasoning","content":["r"]},{"role":"assistant","content":[],"status":"in_progress"}]}`,
		`{"input":"x","previous_response_id":"resp_1","store":false}`,
		`{"input":[{"type":"reasoning","summary":[{"text":1}]},{"role":"assistant","content":"a"},{"role":"assistant","content":[{"text":"b"}]}]}`,
		`{"input":"x","reasoning":{"effort":"none"},"chat_template_kwargs":{"enable_thinking":true,"add_generation_prompt":1}}`,
		`{"input":"x","reasoning":{"effort":null},"chat_template_kwargs":null}`,
		`{}`, `[]`, `{"input":1}`, ``,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		FindUsage(body)
		Final(body, true)
		Final(body, false)
		ID(body)
		r, err := Parse(body)
		if err != nil {
			return
		}
		out, err := ToChat(r, &History{Output: []string{"o"}})
		if err != nil {
			return
		}
		var v struct {
			Messages []json.RawMessage `json:"messages"`
		}
		if json.Unmarshal(out, &v) != nil {
			t.Fatalf("ToChat(%q) is not a chat body: %s", body, out)
		}
	})
}
