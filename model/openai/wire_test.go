package openai

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/inferrail/inferrail/model/wirefix"
)

// fixture returns testdata/name's expected bytes.
func fixture(t *testing.T, name string) []byte { return wirefix.Read(t, os.DirFS("testdata"), name) }

const (
	chatID    = "chatcmpl-a47c93077b0e387a"
	cmplID    = "cmpl-5c0ffee5c0ffee00"
	created   = int64(1753106400)
	fp        = "vllm-0.26.0-2844599c"
	gptOSS    = "openai/gpt-oss-120b"
	qwen      = "Qwen/Qwen3-8B"
	htmlishly = "<b>Tom & Jerry</b> \u2014 \u201cquoted\u201d\nline\u2028sep\tend \\ \"q\" \x01\x7f caf\u00e9 \U0001F600"
)

func TestWireParity(t *testing.T) {
	chat := func(includeUsage bool) *Stream {
		return NewChatStream(StreamConfig{ID: chatID, Created: created, Model: qwen, Fingerprint: fp, IncludeUsage: includeUsage})
	}
	cmpl := func(includeUsage bool, fingerprint string) *Stream {
		return NewCompletionStream(StreamConfig{ID: cmplID, Created: created, Model: qwen, Fingerprint: fingerprint, IncludeUsage: includeUsage})
	}
	cases := map[string]func() []byte{
		"chat_completion.txt": func() []byte {
			return AppendChatCompletion(nil, &ChatCompletion{
				ID: chatID, Created: created, Model: gptOSS, Role: "assistant",
				Content: "Hello! How can I help you today?", Finish: Finish{Reason: "length"},
				Fingerprint: fp, Usage: Usage{PromptTokens: 71, CompletionTokens: 16},
			})
		},
		"chat_completion_cached.txt": func() []byte {
			return AppendChatCompletion(nil, &ChatCompletion{
				ID: ChatID("0123456789abcdef"), Created: created, Model: qwen, Role: "assistant",
				Content: htmlishly, Finish: Finish{Reason: "stop", Stop: StopString("</answer>")},
				Usage: Usage{PromptTokens: 1200, CompletionTokens: 35, CachedTokens: 1184, Details: true},
			})
		},
		"completion.txt": func() []byte {
			return AppendCompletion(nil, &Completion{
				ID: cmplID, Created: created, Model: qwen, Text: " Paris.",
				Finish: Finish{Reason: "stop", Stop: StopToken(151645)}, Fingerprint: fp,
				Usage: Usage{PromptTokens: 7, CompletionTokens: 2, Details: true},
			})
		},
		"chat_chunk_role.txt": func() []byte { return chat(false).AppendRole(nil, "assistant", nil) },
		"chat_chunk_role_continuous.txt": func() []byte {
			return chat(true).AppendRole(nil, "assistant", &Usage{PromptTokens: 33})
		},
		"chat_chunk_content.txt":        func() []byte { return chat(false).AppendContent(nil, " fast", nil) },
		"chat_chunk_content_escape.txt": func() []byte { return chat(false).AppendContent(nil, htmlishly, nil) },
		"chat_chunk_content_continuous.txt": func() []byte {
			// Details do not show on continuous usage.
			return chat(true).AppendContent(nil, " fast", &Usage{PromptTokens: 16, CompletionTokens: 20, CachedTokens: 8, Details: true})
		},
		"chat_chunk_finish.txt": func() []byte { return chat(false).AppendFinish(nil, "", Finish{Reason: "stop"}, nil) },
		"chat_chunk_finish_usage.txt": func() []byte {
			return chat(true).AppendFinish(nil, "!", Finish{Reason: "stop", Stop: StopToken(151645)}, nil)
		},
		"chat_chunk_finish_continuous.txt": func() []byte {
			return chat(true).AppendFinish(nil, ".", Finish{Reason: "length"}, &Usage{PromptTokens: 16, CompletionTokens: 21})
		},
		"chat_chunk_usage.txt": func() []byte {
			return chat(true).AppendUsage(nil, &Usage{PromptTokens: 16, CompletionTokens: 20, CachedTokens: 3})
		},
		"chat_chunk_usage_cached.txt": func() []byte {
			return chat(true).AppendUsage(nil, &Usage{PromptTokens: 16, CompletionTokens: 20, Details: true})
		},
		"completion_chunk_content.txt": func() []byte { return cmpl(false, fp).AppendContent(nil, " Paris", nil) },
		"completion_chunk_content_continuous.txt": func() []byte {
			return cmpl(true, fp).AppendContent(nil, " Paris", &Usage{PromptTokens: 7, CompletionTokens: 1})
		},
		"completion_chunk_finish.txt": func() []byte {
			return cmpl(false, fp).AppendFinish(nil, ".", Finish{Reason: "length"}, nil)
		},
		"completion_chunk_finish_usage.txt": func() []byte {
			return cmpl(true, fp).AppendFinish(nil, "", Finish{Reason: "stop", Stop: StopString("\n\n")}, nil)
		},
		"completion_chunk_usage.txt": func() []byte {
			return cmpl(true, "").AppendUsage(nil, &Usage{PromptTokens: 7, CompletionTokens: 2})
		},
		"completion_chunk_usage_cached.txt": func() []byte {
			return cmpl(true, fp).AppendUsage(nil, &Usage{PromptTokens: 7, CompletionTokens: 2, CachedTokens: 4, Details: true})
		},
		"done.txt":                  func() []byte { return AppendDone(nil) },
		"error_model_not_found.txt": func() []byte { return AppendError(nil, ModelNotFound("gpt-4")) },
		"error_max_tokens.txt": func() []byte {
			r, err := ParseChat([]byte(`{"model":"m","messages":[{"role":"user","content":"hi"}],"max_tokens":-46771}`))
			if err != nil {
				t.Fatal(err)
			}
			return AppendError(nil, asError(t, r.Check()))
		},
		"error_body_parse.txt": func() []byte {
			_, err := ParseChat([]byte("{\"model\":\"\xff\"}"))
			return AppendError(nil, asError(t, err))
		},
		"error_stream.txt": func() []byte {
			return AppendStreamError(nil, &Error{Status: 400, Type: TypeBadRequestError, Param: "max_tokens", Message: "boom: " + htmlishly})
		},
		"models.txt": func() []byte {
			return AppendModelList(nil, []ModelCard{
				{ID: qwen, Created: created, Root: "/models/Qwen3-8B", MaxModelLen: 32768, PermissionID: "modelperm-9f3b2c1d0e4a5b6c"},
				{ID: "sql-lora", Created: created, Root: "/adapters/sql-lora", Parent: qwen, PermissionID: "modelperm-0a1b2c3d4e5f6a7b"},
			})
		},
		"version.txt":        func() []byte { return AppendVersion(nil, "0.26.0") },
		"tokenize.txt":       func() []byte { return AppendTokenize(nil, []uint32{151644, 872, 198}, 40960) },
		"tokenize_empty.txt": func() []byte { return AppendTokenize(nil, nil, 8) },
		"detokenize.txt":     func() []byte { return AppendDetokenize(nil, htmlishly) },
	}
	files, err := filepath.Glob(filepath.Join("testdata", "*.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if _, ok := cases[filepath.Base(f)]; !ok {
			t.Errorf("fixture %s has no test", f)
		}
	}
	for name, gen := range cases {
		t.Run(name, func(t *testing.T) {
			want := fixture(t, name)
			if got := gen(); !bytes.Equal(got, want) {
				t.Errorf("mismatch\n got: %q\nwant: %q", got, want)
			}
		})
	}
}

func asError(t *testing.T, err error) *Error {
	t.Helper()
	e, ok := err.(*Error)
	if !ok {
		t.Fatalf("error %v (%T) is not an *Error", err, err)
	}
	return e
}
