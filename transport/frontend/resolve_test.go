package frontend

import (
	"strings"
	"testing"
)

// TestResolveModelFindsTheRest: the one scan that finds a body's model
// also finds its prompt and user, and where the model is spliced in (an
// alias, no model) they are found again in the new body, so a prompt of a
// shape vLLM refuses is refused whatever model name came.
func TestResolveModelFindsTheRest(t *testing.T) {
	g := start(t, 1, nil, nil)
	for _, body := range []string{
		`{"model":"` + model + `","prompt":[1,"a"],"user":"u-1"}`,
		`{"model":"sim","prompt":[1,"a"],"user":"u-1"}`, // an alias, spliced longer
		`{"prompt":[1,"a"],"user":"u-1"}`,               // no model: inserted first
		`{"model":7,"prompt":[1,"a"],"user":"u-1"}`,     // not a string: replaced
	} {
		rs := ResolveModel(g.fl, []byte(body))
		if rs.Err != nil {
			t.Fatalf("%s: %v", body, rs.Err)
		}
		p, u := rs.Prompt, rs.User
		if !p.Found || string(rs.Body[p.Start:p.End]) != `[1,"a"]` || p.Name != "" {
			t.Errorf("%s: prompt at %d:%d of %s (%+v)", body, p.Start, p.End, rs.Body, p)
		}
		if !u.Found || !u.IsString || u.Name != "u-1" || string(rs.Body[u.Start:u.End]) != `"u-1"` {
			t.Errorf("%s: user %+v in %s", body, u, rs.Body)
		}
		if e := rs.PromptError("/v1/completions"); e == nil {
			t.Errorf("%s: a prompt mixing ids and strings was not refused", body)
		}
		if e := rs.PromptError("/v1/chat/completions"); e != nil {
			t.Errorf("%s: a chat body's prompt member was checked: %v", body, e)
		}
		resp, text := g.post("/v1/completions", body)
		if resp.StatusCode != 400 || !strings.Contains(text, "prompt") {
			t.Errorf("%s: %d %s", body, resp.StatusCode, text)
		}
	}
	if rs := ResolveModel(g.fl, []byte(`{"model":"sim"`)); rs.Err == nil || rs.PromptError("/v1/completions") != nil {
		t.Errorf("a broken body: %+v", rs)
	}
}
