package openai

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestParsePrompt(t *testing.T) {
	ok := func(body string, want Prompt) {
		t.Helper()
		got, err := ParsePrompt([]byte(body))
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s: %+v, %v; want %+v", body, got, err, want)
		}
	}
	ok(`{"prompt":[1,2,3]}`, Prompt{Kind: PromptTokens, Count: 1, Tokens: []uint32{1, 2, 3}})
	ok(`{"prompt":[[4,5],[6]]}`, Prompt{Kind: PromptTokens, Count: 2, Tokens: []uint32{4, 5}})
	ok(`{"prompt":[[7]]}`, Prompt{Kind: PromptTokens, Count: 1, Tokens: []uint32{7}})
	ok(`{"prompt":"hi"}`, Prompt{Kind: PromptText, Count: 1, Text: "hi"})
	ok(`{"prompt":["a","b"]}`, Prompt{Kind: PromptText, Count: 2, Text: "a"})
	ok(`{"model":"m"}`, Prompt{})
	// pydantic's lax ints, as vLLM takes them: an integral float, a
	// numeric string, a bool.
	ok(`{"prompt":[1.0,"2",true]}`, Prompt{Kind: PromptTokens, Count: 1, Tokens: []uint32{1, 2, 1}})

	bad := func(body, want string) {
		t.Helper()
		_, err := ParsePrompt([]byte(body))
		var e *Error
		if !errors.As(err, &e) || e.Status != 400 || !strings.Contains(e.Message, want) {
			t.Errorf("%s: %v; want a 400 with %q", body, err, want)
		}
	}
	bad(`{"prompt":[]}`, "The decoder prompt cannot be empty")
	bad(`{"prompt":[[]]}`, "The decoder prompt cannot be empty")
	bad(`{"prompt":[[1],[ ]]}`, "The decoder prompt cannot be empty")
	bad(`{"prompt":[1,"a"]}`, "body.prompt.1: Input should be a valid integer")
	bad(`{"prompt":[1,-2]}`, "body.prompt.1: Input should be greater than or equal to 0")
	bad(`{"prompt":[1.5]}`, "body.prompt.0: Input should be a valid integer, got a number with a fractional part")
	bad(`{"prompt":[[1],2]}`, "body.prompt.0: Input should be a valid integer")
	bad(`{"prompt":[[1],["a"]]}`, "body.prompt.0: Input should be a valid integer")
	bad(`{"prompt":{"a":1}}`, "body.prompt")
	bad(`{"prompt":[1,2`, "JSON decode error")
}

// ExampleAppendTokenize: vLLM's TokenizeResponse as its JSONResponse
// sends it: fields in declaration order (count, max_model_len, tokens,
// token_strs), compact.
func ExampleAppendTokenize() {
	fmt.Println(string(AppendTokenize(nil, []uint32{151644, 872, 198}, 40960)))
	fmt.Println(string(AppendTokenize(nil, nil, 8)))
	// Output:
	// {"count":3,"max_model_len":40960,"tokens":[151644,872,198],"token_strs":null}
	// {"count":0,"max_model_len":8,"tokens":[],"token_strs":null}
}
