package anthropic

import (
	"encoding/json"
	"testing"
)

// FuzzParse: any body is parsed or refused, never a panic; what parses
// converts into a JSON object (or ErrUnsupported), in both modes, with
// the billing header dropped or kept (KeepBillingHeader).
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		`{"model":"m","max_tokens":5,"system":"S","messages":[{"role":"user","content":"hi"}]}`,
		`{"model":"m","max_tokens":5,"system":[{"type":"text","text":"x-anthropic-billing-header: a"}],"messages":[{"role":"system","content":"L"},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t","content":[{"type":"text","text":"a"},{"type":"image","source":{"type":"url","url":"u"}},{"type":"tool_reference","tool_name":"x"}]}]},{"role":"system","content":"R"}]}`,
		`{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":[{"type":"tool_use","id":"t","name":"n","input":{"a":[1,2]}}]},{"role":"system","content":"z"},{"role":"user","content":[{"type":"tool_result","content":"r"}]}],"tools":[{"name":"n","input_schema":{}}]}`,
		`{"model":"m","messages":[{"role":"ctx","content":[{"type":"thinking","thinking":"t"},{"type":"redacted_thinking","data":"d"}]}]}`,
		`{"model":"m","max_tokens":4096,"thinking":{"type":"enabled","budget_tokens":1024},"output_config":{"effort":"low"},"messages":[{"role":"user","content":"q"}]}`,
		`{"model":"m","max_tokens":9,"thinking":{"type":"disabled"},"messages":[]}`,
		`{}`, `[]`, `{"model":1}`, ``,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, count bool) {
		r, err := Parse(body, count)
		if err != nil {
			return
		}
		for _, keep := range []bool{false, true} {
			r.KeepBillingHeader = keep
			for _, mode := range []InlineMode{Preserve, Fold} {
				out, err := ToChat(r, mode, now)
				if err != nil {
					continue
				}
				var v map[string]any
				if json.Unmarshal(out, &v) != nil {
					t.Fatalf("ToChat(%q) is not a JSON object: %s", body, out)
				}
			}
		}
		FindUsage(body)
	})
}
