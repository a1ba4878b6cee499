package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"reflect"
	"testing"
)

var fuzzSeeds = []string{
	`{"model":"m","messages":[{"role":"user","content":"hi"}]}`,
	`{"messages":[{"role":"user","content":[{"type":"text","text":"a"},{"type":"image_url","image_url":{"url":"u"}},"b"]}],"stream":true,"stream_options":{"include_usage":true,"continuous_usage_stats":true}}`,
	`{"prompt":[1,2,3],"max_tokens":null,"n":1,"best_of":2,"logprobs":3,"echo":true}`,
	`{"prompt":["a","b"],"stream_options":{"x":1}}`,
	`{"prompt":[[1],[2]],"cache_salt":"a/b","temperature":NaN,"seed":1e400}`,
	`{"messages":[],"tools":[{"function":{"name":"f"}}],"tool_choice":{"function":{"name":"f"}}}`,
	`{"messages":[{"role":"user","content":"\ud83d\ude00\ud800"}],"top_logprobs":"x"}`,
	`{"\u006dodel":"x","max_tokens":"1_000","stream":"yes","logit_bias":{"1":"-1.5"}}`,
	`[{"a":[{"b":[]}]}]`,
	"\xef\xbb\xbf{}",
	`{"a":-Infinity} x`,
	"",
}

// fuzzParse checks the contract both parsers share: no panic; an error is
// an *Error with a 4xx status and a message; on success Check returns nil
// or such an error; and the reader accepts only JSON (plus Python's NaN and
// Infinity literals).
func fuzzParse(t *testing.T, body []byte, parse func([]byte) (func() error, error)) {
	check, err := parse(body)
	if err != nil {
		assertAPIError(t, body, err)
		var e *Error
		errors.As(err, &e)
		// A document encoding/json accepts is never a JSON decode error here.
		if json.Valid(body) && bytes.Contains([]byte(e.Message), []byte("JSON decode error")) {
			t.Fatalf("%q: valid JSON reported as %q", body, e.Message)
		}
		return
	}
	if !json.Valid(bytes.TrimPrefix(body, []byte("\xef\xbb\xbf"))) &&
		!bytes.Contains(body, []byte("NaN")) && !bytes.Contains(body, []byte("Infinity")) {
		t.Fatalf("%q: accepted but not JSON", body)
	}
	if err := check(); err != nil {
		assertAPIError(t, body, err)
	}
	// What parsed once parses again the same way.
	if _, err := parse(body); err != nil {
		t.Fatalf("%q: second parse failed: %v", body, err)
	}
}

func assertAPIError(t *testing.T, body []byte, err error) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("%q: error %v (%T) is not an *Error", body, err, err)
	}
	if e.Status < 400 || e.Status > 499 || e.Message == "" || e.Type == "" {
		t.Fatalf("%q: bad error %+v", body, e)
	}
	out := AppendError(nil, e)
	if !json.Valid(out) {
		t.Fatalf("%q: error body %s is not JSON", body, out)
	}
}

func FuzzParseChat(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fuzzParse(t, body, func(b []byte) (func() error, error) {
			r, err := ParseChat(b)
			if err != nil {
				return nil, err
			}
			return r.Check, nil
		})
	})
}

func FuzzParseCompletion(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		fuzzParse(t, body, func(b []byte) (func() error, error) {
			r, err := ParseCompletion(b)
			if err != nil {
				return nil, err
			}
			return r.Check, nil
		})
	})
}

// FuzzParsePrompt: ParsePrompt never panics, its errors are API errors, and
// it agrees with ParseCompletion: a body whose prompt ParseCompletion types
// gets the same prompt (or ErrEmptyPrompt for a token list with no ids), and
// a prompt ParsePrompt finds mistyped fails ParseCompletion too.
func FuzzParsePrompt(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	for _, s := range []string{`{"prompt":[]}`, `{"prompt":[[1],[]]}`, `{"prompt":[1,"a"]}`, `{"prompt":[-1]}`,
		`{"prompt":[1.5]}`, `{"prompt":[1.0,"2",true]}`, `{"prompt":[[1],2]}`, `{"prompt":{"a":1}}`, `{"prompt":[[1,2],[3]]}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		p, err := ParsePrompt(body)
		full, ferr := ParseCompletion(body)
		if err != nil {
			assertAPIError(t, body, err)
			if err != ErrEmptyPrompt && ferr == nil {
				t.Fatalf("%q: ParsePrompt refused it (%v), ParseCompletion took it", body, err)
			}
			return
		}
		if p.Kind == PromptTokens && len(p.Tokens) == 0 {
			t.Fatalf("%q: an empty token list accepted", body)
		}
		if ferr == nil && !reflect.DeepEqual(p, full.Prompt) {
			t.Fatalf("%q: ParsePrompt %+v, ParseCompletion %+v", body, p, full.Prompt)
		}
	})
}
