package loadgen

import (
	"bytes"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"
	"testing/iotest"
)

// readAll collects every event of an SSE body as "type|data" strings, and
// the error that ended it (nil for a clean EOF).
func readAll(r io.Reader) ([]string, error) {
	sr := NewSSEReader(r)
	var out []string
	for {
		ev, data, err := sr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, string(ev)+"|"+string(data))
	}
}

func TestSSEReader(t *testing.T) {
	f := func(in string, want []string, wantErr error) {
		t.Helper()
		// Byte at a time too, so that every split of a CRLF across reads is seen.
		for _, r := range []io.Reader{strings.NewReader(in), iotest.OneByteReader(strings.NewReader(in))} {
			got, err := readAll(r)
			if !errors.Is(err, wantErr) {
				t.Errorf("%q: error %v, want %v", in, err, wantErr)
			}
			if !slices.Equal(got, want) {
				t.Errorf("%q: events %q, want %q", in, got, want)
			}
		}
	}
	f("", nil, nil)
	f("data: a\n\n", []string{"|a"}, nil)
	f("data: a\n\ndata: [DONE]\n\n", []string{"|a", "|[DONE]"}, nil)
	f("data:a\n\n", []string{"|a"}, nil)                   // the space is optional
	f("data:  a\n\n", []string{"| a"}, nil)                // only one space is dropped
	f("data: a\ndata: b\n\n", []string{"|a\nb"}, nil)      // lines join with LF
	f("data: a\r\n\r\n", []string{"|a"}, nil)              // CRLF
	f("data: a\r\rdata: b\r\r", []string{"|a", "|b"}, nil) // bare CR
	f("data: a\r\n\ndata: b\n\r\n", []string{"|a", "|b"}, nil)
	f(": keep-alive\n\ndata: a\n\n", []string{"|a"}, nil)    // comment
	f("data: a\n\n: keep-alive\n", []string{"|a"}, nil)      // a comment starts no event
	f("event: error\ndata: x\n\n", []string{"error|x"}, nil) // event type
	f("event: e\n\ndata: x\n\n", []string{"|x"}, nil)        // a blank line resets the type
	f("data\n\n", []string{"|"}, nil)                        // an empty data line is data
	f("event: x\n\n", nil, nil)                              // no data line dispatches nothing
	f("data\ndata\n\n", []string{"|\n"}, nil)
	f("id: 1\nretry: 5\ndata: a\n\n", []string{"|a"}, nil) // other fields are ignored
	f("\xef\xbb\xbfdata: a\n\n", []string{"|a"}, nil)      // BOM
	f("data: a\n\n\n\n", []string{"|a"}, nil)
	f("data: a\n\ndata: b\n", []string{"|a"}, io.ErrUnexpectedEOF) // cut inside an event
	f("data: a\n\ndata: b", []string{"|a"}, io.ErrUnexpectedEOF)
	f("data: a", nil, io.ErrUnexpectedEOF)
}

func TestSSEReaderLongLine(t *testing.T) {
	long := strings.Repeat("x", 10_000)
	got, err := readAll(strings.NewReader("data: " + long + "\n\ndata: b\n\n"))
	if err != nil || len(got) != 2 || got[0] != "|"+long || got[1] != "|b" {
		t.Fatalf("got %d events, err %v", len(got), err)
	}
	_, err = readAll(strings.NewReader("data: " + strings.Repeat("x", MaxLine+1)))
	if !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("over-long line: error %v, want %v", err, ErrLineTooLong)
	}
}

// The simulator's own output for a 3-token chat and completion stream with
// include_usage (captured from `inferrail sim`, ids shortened).
const (
	chatStream = `data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"prompt_token_ids":null,"prompt_text":null}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"at "},"logprobs":null,"finish_reason":null,"token_ids":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"way "},"logprobs":null,"finish_reason":null,"token_ids":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":"kv "},"logprobs":null,"finish_reason":"length","stop_reason":null,"token_ids":null}]}

data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":11,"total_tokens":14,"completion_tokens":3},"system_fingerprint":"vllm-0.26.0-91401396"}

data: [DONE]

`
	completionStream = `data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"as ","logprobs":null,"finish_reason":null,"stop_reason":null,"prompt_token_ids":null,"token_ids":null}]}

data: {"id":"cmpl-1","object":"text_completion","created":1,"model":"m","choices":[{"index":0,"text":"on ","logprobs":null,"finish_reason":"length","stop_reason":null,"prompt_token_ids":null,"token_ids":null}]}

data: [DONE]

`
)

func tally(t *testing.T, body string) (*StreamTally, error) {
	t.Helper()
	st := NewStreamTally()
	sr := NewSSEReader(strings.NewReader(body))
	for {
		_, data, err := sr.Next()
		if err == io.EOF {
			return st, nil
		}
		if err != nil {
			return st, err
		}
		if _, err := st.Add(data); err != nil {
			return st, err
		}
	}
}

func TestStreamTally(t *testing.T) {
	st, err := tally(t, chatStream)
	if err != nil {
		t.Fatal(err)
	}
	if st.Content != 3 || st.Roles != 1 || st.Usage != 3 || st.Finish != "length" || !st.Done || string(st.Text) != "at way kv " {
		t.Fatalf("chat tally %+v", st)
	}
	if err := st.Check(3, true); err != nil {
		t.Fatal(err)
	}
	if err := st.Check(4, true); err == nil {
		t.Fatal("check(4) passed on 3 tokens")
	}

	st, err = tally(t, completionStream)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Check(2, false); err != nil {
		t.Fatal(err)
	}
	if err := st.Check(2, true); err == nil {
		t.Fatal("check passed without the usage chunk")
	}

	// Broken streams.
	bad := func(body, why string) {
		t.Helper()
		st, err := tally(t, body)
		if err == nil {
			err = st.Check(3, true)
		}
		if err == nil {
			t.Errorf("%s: no error", why)
		}
	}
	bad(strings.Replace(chatStream, "data: [DONE]\n\n", "", 1), "no [DONE]")
	bad(chatStream+"data: {}\n\n", "event after [DONE]")
	bad(strings.Replace(chatStream, `"completion_tokens":3`, `"completion_tokens":4`, 1), "usage mismatch")
	bad(strings.Replace(chatStream, `"content":"way "`, `"content":""`, 1), "a token chunk without text")
	bad(strings.Replace(chatStream, `"finish_reason":"length"`, `"finish_reason":"stop"`, 1), "finish reason")
	bad(strings.Replace(chatStream, `{"index":0,"delta":{"content":"at "}`, `{"index":0,"delta":{"content":"at "`, 1), "bad JSON")
	bad(`data: {"error":{"message":"boom","type":"x","code":500}}`+"\n\ndata: [DONE]\n\n", "stream error")
}

// FuzzSSEReader checks the parser on any input: it never panics, the data
// it returns holds no CR (every CR ends a line), and writing its events
// back out in canonical form reads back the same events.
func FuzzSSEReader(f *testing.F) {
	f.Add([]byte(chatStream))
	f.Add([]byte(completionStream))
	f.Add([]byte("data: a\r\n\r\ndata: b\rdata: c\r\r: x\nevent: e\ndata\n\n"))
	f.Add([]byte("\xef\xbb\xbfdata:x\n\ndata: y"))
	f.Fuzz(func(t *testing.T, in []byte) {
		var events [][2]string
		sr := NewSSEReader(bytes.NewReader(in))
		for {
			ev, data, err := sr.Next()
			if err != nil {
				break
			}
			if bytes.ContainsRune(data, '\r') || bytes.ContainsAny(ev, "\r\n") {
				t.Fatalf("CR or LF inside a line: event %q data %q", ev, data)
			}
			events = append(events, [2]string{string(ev), string(data)})
		}
		var canon bytes.Buffer
		for _, e := range events {
			if e[0] != "" {
				canon.WriteString("event: " + e[0] + "\n")
			}
			for _, line := range strings.Split(e[1], "\n") {
				canon.WriteString("data: " + line + "\n")
			}
			canon.WriteString("\n")
		}
		sr = NewSSEReader(&canon)
		for i := 0; ; i++ {
			ev, data, err := sr.Next()
			if err == io.EOF {
				if i != len(events) {
					t.Fatalf("round trip: %d events, want %d", i, len(events))
				}
				return
			}
			if err != nil {
				t.Fatalf("round trip: event %d: %v", i, err)
			}
			if i >= len(events) || string(ev) != events[i][0] || string(data) != events[i][1] {
				t.Fatalf("round trip: event %d is %q %q", i, ev, data)
			}
		}
	})
}

// FuzzStreamTally feeds arbitrary event data to the chunk checker: it must
// never panic, and it calls a chunk content exactly when it counted text in it.
func FuzzStreamTally(f *testing.F) {
	for _, body := range []string{chatStream, completionStream} {
		sr := NewSSEReader(strings.NewReader(body))
		for {
			_, data, err := sr.Next()
			if err != nil {
				break
			}
			f.Add(append([]byte(nil), data...))
		}
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		st := NewStreamTally()
		content, err := st.Add(data)
		if err == nil && content != (st.Content > 0) {
			t.Fatalf("content %v but %d content chunks", content, st.Content)
		}
		st.Check(1, true)
	})
}
