package anthropic

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/inferrail/inferrail/model/wirefix"
)

// fixture returns testdata/name's expected bytes.
func fixture(t *testing.T, name string) []byte { return wirefix.Read(t, os.DirFS("testdata"), name) }

// textStream is a streamed text answer as the simulator writes it: one
// delta per piece, the block closed when there was one.
func textStream(id, model string, pieces []string, stop, stopSeq string, first, final Usage) []byte {
	b := AppendMessageStart(nil, id, model, first)
	for i, p := range pieces {
		if i == 0 {
			b = AppendTextStart(b, 0)
		}
		b = AppendTextDelta(b, 0, p)
	}
	if len(pieces) > 0 {
		b = AppendBlockStop(b, 0)
	}
	b = AppendMessageDelta(b, stop, stopSeq, final)
	return AppendMessageStop(b)
}

// TestWireParity compares the writers' bytes with testdata/wire_*.txt,
// made by testdata/gen_fixtures.py from vLLM's pydantic models.
func TestWireParity(t *testing.T) {
	const (
		id   = "chatcmpl-a47c93077b0e387a"
		qwen = "Qwen/Qwen3-8B"
		html = "<b>Tom & Jerry</b> \u2014 \u201cquoted\u201d\nline\u2028sep\tend \\ \"q\" \x01\x7f caf\u00e9 \U0001F600"
	)
	plain := func(in, out int) Usage { return Usage{Input: in, Output: out, HasInput: true} }
	cached := func(in, out, read int) Usage {
		return Usage{Input: in, Output: out, CacheRead: read, HasInput: true, HasCacheRead: true}
	}
	cases := map[string][]byte{
		"wire_message.txt": AppendMessage(nil, &Answer{ID: id, Model: qwen, Text: "Hello! How can I help you today?",
			StopReason: "end_turn", Usage: plain(71, 9)}),
		"wire_message_cached.txt": AppendMessage(nil, &Answer{ID: id, Model: qwen, Text: html,
			StopReason: "max_tokens", Usage: cached(16, 35, 1184)}),
		"wire_message_empty.txt": AppendMessage(nil, &Answer{ID: id, Model: qwen, StopReason: "max_tokens", Usage: plain(5, 0)}),
		"wire_message_stop_sequence.txt": AppendMessage(nil, &Answer{ID: id, Model: qwen, Text: "1, 2, 3",
			StopReason: "stop_sequence", StopSequence: "\n\n", Usage: plain(12, 7)}),
		"wire_stream.txt": textStream(id, qwen, []string{"Hello", "!", " \u201cok\u201d <3"}, "end_turn", "",
			plain(33, 0), cached(17, 3, 16)),
		"wire_stream_length.txt":        textStream(id, qwen, []string{"a", "\n"}, "max_tokens", "", plain(8, 0), plain(8, 2)),
		"wire_stream_empty.txt":         textStream(id, qwen, nil, "max_tokens", "", plain(8, 0), plain(8, 0)),
		"wire_stream_stop_sequence.txt": textStream(id, qwen, []string{"1, 2"}, "stop_sequence", "\n\n", plain(12, 0), plain(12, 1)),
		"wire_error.txt":                AppendErrorType(nil, "BadRequestError", "max_tokens: <must be> > 0 & \u2028 caf\u00e9"),
		"wire_count_tokens.txt":         AppendCountTokens(nil, 42),
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
