package openai

import (
	"bufio"
	"encoding/json"
	"errors"
	"os"
	"testing"
)

// TestValidationGolden compares ParseChat / ParseCompletion with what
// pydantic decides for vLLM's request models (testdata/gen_validation.py
// runs the models' validators and field types under real pydantic):
// accepted or rejected, and the error's param.
func TestValidationGolden(t *testing.T) {
	f, err := os.Open("testdata/validation_golden.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	n := 0
	for sc.Scan() {
		var c struct {
			Endpoint string
			Body     string // latin-1: one rune per byte
			Status   int
			Param    *string
		}
		if err := json.Unmarshal(sc.Bytes(), &c); err != nil {
			t.Fatal(err)
		}
		if c.Endpoint == "" {
			continue
		}
		body := make([]byte, 0, len(c.Body))
		for _, r := range c.Body {
			body = append(body, byte(r))
		}
		var perr error
		if c.Endpoint == "chat" {
			_, perr = ParseChat(body)
		} else {
			_, perr = ParseCompletion(body)
		}
		n++
		if c.Status == 200 {
			if perr != nil {
				t.Errorf("%s %s: vLLM accepts, got %v", c.Endpoint, body, perr)
			}
			continue
		}
		var e *Error
		if !errors.As(perr, &e) {
			t.Errorf("%s %s: vLLM rejects (param %v), got %v", c.Endpoint, body, deref(c.Param), perr)
			continue
		}
		if e.Param != deref(c.Param) {
			t.Errorf("%s %s: param %q, vLLM %q (%s)", c.Endpoint, body, e.Param, deref(c.Param), e.Message)
		}
	}
	if n < 100 {
		t.Fatalf("only %d cases", n)
	}
}

func deref(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}
