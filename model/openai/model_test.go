package openai

import (
	"encoding/json"
	"testing"
)

func TestFindModel(t *testing.T) {
	f := func(body, name string, found, isString bool) {
		t.Helper()
		m, err := FindModel([]byte(body))
		if err != nil {
			t.Fatalf("%s: %v", body, err)
		}
		if m.Name != name || m.Found != found || m.IsString != isString {
			t.Fatalf("%s: got %+v", body, m)
		}
	}
	f(`{"model":"a","messages":[]}`, "a", true, true)
	f(` { "messages":[{"model":"inner"}], "model" : "b" } `, "b", true, true)
	f(`{"model":"a","model":"c"}`, "c", true, true)
	f(`{"mod\u0065l":"x"}`, "x", true, true)
	f(`{"model":"a\u00e9"}`, "aé", true, false)
	f(`{"model":null}`, "", true, false)
	f(`{"model":3}`, "", true, false)
	f(`{"prompt":"x"}`, "", false, false)
	f(`{}`, "", false, false)
	for _, bad := range []string{``, `[]`, `{`, `{"model":"a"`, `{"model":"a"} x`, `"model"`, `{"model" "a"}`} {
		if _, err := FindModel([]byte(bad)); err == nil {
			t.Fatalf("%q: no error", bad)
		}
	}
}

func TestSpliceModel(t *testing.T) {
	f := func(body, name, want string) {
		t.Helper()
		m, err := FindModel([]byte(body))
		if err != nil {
			t.Fatal(err)
		}
		if got := string(SpliceModel(nil, []byte(body), m, name)); got != want {
			t.Fatalf("splice %s: got %s, want %s", body, got, want)
		}
	}
	f(`{"model":"alias","x":1}`, "real/model", `{"model":"real/model","x":1}`)
	f(`{"x":1, "model" : null }`, "m", `{"x":1, "model" : "m" }`)
	f(`{"x":1}`, "m", `{"model":"m","x":1}`)
	f(`{ }`, "m", `{"model":"m" }`)
	f(`{}`, "m", `{"model":"m"}`)
}

// FuzzSpliceModel checks that a splice changes nothing but the model: the
// result parses, names the new model, and equals the original elsewhere.
func FuzzSpliceModel(f *testing.F) {
	f.Add(`{"model":"a","messages":[{"role":"user","content":"hi"}]}`)
	f.Add(`{"prompt":"x","stream":true}`)
	f.Add(`{"model":null}`)
	f.Add(`{}`)
	f.Fuzz(func(t *testing.T, body string) {
		m, err := FindModel([]byte(body))
		if err != nil {
			return
		}
		var before map[string]any
		if json.Unmarshal([]byte(body), &before) != nil {
			return // FindModel checks less than a full parser; that is fine
		}
		out := SpliceModel(nil, []byte(body), m, "served/model")
		var after map[string]any
		if err := json.Unmarshal(out, &after); err != nil {
			t.Fatalf("splice of %q gave invalid JSON %q: %v", body, out, err)
		}
		if after["model"] != "served/model" {
			t.Fatalf("splice of %q: model is %v", body, after["model"])
		}
		delete(before, "model")
		delete(after, "model")
		b1, _ := json.Marshal(before)
		b2, _ := json.Marshal(after)
		if string(b1) != string(b2) {
			t.Fatalf("splice of %q changed other members: %s vs %s", body, b1, b2)
		}
	})
}

// FuzzFindMembers: one scan for several members finds each as FindMember
// does alone, and leaves Name empty where the value was not asked for.
func FuzzFindMembers(f *testing.F) {
	f.Add([]byte(`{"model":"m","prompt":"a long prompt","user":"u1"}`))
	f.Add([]byte(`{"prompt":["a","b"],"model":null,"model":"x\u0041"}`))
	f.Add([]byte(`{"us\u0065r":"e","prompt":12}`))
	f.Add([]byte(`[1]`))
	f.Fuzz(func(t *testing.T, body []byte) {
		members := []Member{{Key: "model", Value: true}, {Key: "prompt"}, {Key: "user", Value: true}}
		var got [3]ModelField
		err := FindMembers(body, members, got[:])
		for i, m := range members {
			want, werr := FindMember(body, m.Key)
			if (err == nil) != (werr == nil) {
				t.Fatalf("%q: FindMembers error %v, FindMember(%q) error %v", body, err, m.Key, werr)
			}
			if !m.Value {
				if got[i].Name != "" {
					t.Fatalf("%q: %s's value was decoded unasked: %q", body, m.Key, got[i].Name)
				}
				want.Name = ""
			}
			if got[i] != want {
				t.Fatalf("%q: %s: FindMembers %+v, FindMember %+v", body, m.Key, got[i], want)
			}
		}
	})
}
