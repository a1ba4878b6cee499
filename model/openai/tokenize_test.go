package openai

import (
	"encoding/json"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"testing"
)

func TestParseDetokenize(t *testing.T) {
	f := func(body string, want Detokenize, wantErr string) {
		t.Helper()
		got, err := ParseDetokenize([]byte(body))
		if wantErr != "" {
			e, ok := err.(*Error)
			if !ok || e.Status != 400 || e.Message != wantErr {
				t.Fatalf("%s: error %v, want %q", body, err, wantErr)
			}
			return
		}
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: %+v, %v; want %+v", body, got, err, want)
		}
	}
	f(`{"model":"m","tokens":[1,2,3]}`, Detokenize{Model: "m", Tokens: []uint32{1, 2, 3}}, "")
	f(`{"tokens":[],"other":{"x":1}}`, Detokenize{Tokens: []uint32{}}, "")
	f(`{"model":null,"tokens":["7",true,2.0]}`, Detokenize{Tokens: []uint32{7, 1, 2}}, "")
	f(`{"tokens":[4294967295,4294967296,9223372036854775807]}`, Detokenize{Tokens: []uint32{math.MaxUint32}, Wide: true}, "")
	f(`{"model":"m"}`, Detokenize{}, "1 validation error:\n  body.tokens: Field required")
	f(`{"tokens":null}`, Detokenize{}, "1 validation error:\n  body.tokens: Input should be a valid list")
	f(`{"model":1,"tokens":[-1,1.5,9223372036854775808]}`, Detokenize{},
		"4 validation errors:\n  body.model: Input should be a valid string\n"+
			"  body.tokens.0: Input should be greater than or equal to 0\n"+
			"  body.tokens.1: Input should be a valid integer, got a number with a fractional part\n"+
			"  body.tokens.2: Input should be less than or equal to 9223372036854775807")
	f(`[]`, Detokenize{}, "1 validation error:\n  body: Input should be a valid dictionary or object to extract fields from")
}

// ExampleAppendRender: the GenerateRequest of a chat render, as vLLM's
// JSONResponse dumps it.
func ExampleAppendRender() {
	r := Render{RequestID: "chatcmpl-0123456789abcdef", TokenIDs: []uint32{151644, 872, 198}, MaxTokens: 40957,
		Model: "Qwen/Qwen3-8B", ModelSet: true}
	fmt.Println(string(AppendRender(nil, &r)))
	// Output:
	// {"request_id":"chatcmpl-0123456789abcdef","token_ids":[151644,872,198],"features":null,"sampling_params":{"stop":[],"stop_token_ids":[],"max_tokens":40957,"output_kind":2,"skip_clone":true,"bad_words":[],"skip_reading_prefix_cache":false},"model":"Qwen/Qwen3-8B","stream":false,"stream_options":null,"cache_salt":null,"priority":0,"kv_transfer_params":null}
}

// FuzzParseDetokenize: ParseDetokenize never panics, refuses with API
// errors, agrees with encoding/json on what the ids are, and its answer
// for the decoded text is JSON.
func FuzzParseDetokenize(f *testing.F) {
	for _, s := range []string{`{"model":"m","tokens":[1,2,3]}`, `{"tokens":[]}`, `{"tokens":[-1]}`, `{"tokens":["1",true]}`,
		`{"tokens":[4294967296]}`, `{"tokens":[1e3]}`, `{"tokens":"x"}`, `{}`, `[]`, `null`, ``, "\xff", `{"tokens":[1,`,
		`{"model":"\ud800","tokens":[1]}`, `{"tokens":[1],"tokens":[2]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		d, err := ParseDetokenize(body)
		if err != nil {
			assertAPIError(t, body, err)
			return
		}
		var std struct {
			Tokens []json.Number `json:"tokens"`
		}
		if json.Unmarshal(body, &std) == nil && std.Tokens != nil {
			var ints []uint32
			wide := false
			for _, n := range std.Tokens {
				v, err := strconv.ParseUint(string(n), 10, 64)
				switch {
				case err != nil:
					return // a float or a lax form: pydantic's rules, not encoding/json's
				case v > math.MaxUint32:
					wide = true
				default:
					ints = append(ints, uint32(v))
				}
			}
			if !slices.Equal(ints, d.Tokens) || wide != d.Wide {
				t.Fatalf("%q: %v (wide %v), encoding/json read %v", body, d.Tokens, d.Wide, std.Tokens)
			}
		}
		if out := AppendDetokenize(nil, d.Model); !json.Valid(out) {
			t.Fatalf("%q: %s is not JSON", body, out)
		}
	})
}

// FuzzAppendRender: a render answer is JSON holding what it was given.
func FuzzAppendRender(f *testing.F) {
	f.Add("chatcmpl-0123456789abcdef", "m", "salt", []byte{1, 2, 3}, 40, true, true, int64(0))
	f.Add("", "\x00\"\\", "", []byte{}, 16, false, false, int64(-3))
	f.Fuzz(func(t *testing.T, id, model, salt string, raw []byte, maxTok int, stream, usage bool, priority int64) {
		ids := make([]uint32, len(raw))
		for i, b := range raw {
			ids[i] = uint32(b) * 16777259
		}
		r := Render{RequestID: id, TokenIDs: ids, MaxTokens: maxTok, Model: model, ModelSet: model != "", Stream: stream,
			StreamOptions: StreamOptions{Set: usage, IncludeUsage: true}, CacheSalt: salt, Priority: priority}
		out := AppendRenderList(nil, []Render{r, r})
		var back []struct {
			TokenIDs []uint32 `json:"token_ids"`
			Sampling struct {
				MaxTokens *int `json:"max_tokens"`
			} `json:"sampling_params"`
			Stream   bool  `json:"stream"`
			Priority int64 `json:"priority"`
		}
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("%s: %v", out, err)
		}
		if len(back) != 2 || !slices.Equal(back[0].TokenIDs, ids) && len(ids) > 0 || back[1].Stream != stream ||
			back[0].Priority != priority || (maxTok == 16) != (back[0].Sampling.MaxTokens == nil) {
			t.Fatalf("%+v: read back %+v from %s", r, back, out)
		}
	})
}

// FuzzOnlyMembers: OnlyMembers agrees with encoding/json on the keys of
// an object.
func FuzzOnlyMembers(f *testing.F) {
	for _, s := range []string{`{"model":"m","prompt":"x"}`, `{"mod\u0065l":1}`, `{"temperature":1}`, `{}`, `[]`, `{"a":`, ``} {
		f.Add([]byte(s))
	}
	allowed := []string{"model", "prompt", "stream"}
	f.Fuzz(func(t *testing.T, body []byte) {
		got := OnlyMembers(body, allowed)
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err != nil || m == nil {
			if got && json.Valid(body) {
				t.Fatalf("%q: not an object, but OnlyMembers took it", body)
			}
			return
		}
		want := true
		for k := range m {
			want = want && slices.Contains(allowed, k)
		}
		if got != want {
			t.Fatalf("%q: OnlyMembers %v, keys %v", body, got, m)
		}
	})
}
