package openai

import (
	"strings"
	"testing"
)

func TestFinishReasonDefault(t *testing.T) {
	s := NewChatStream(StreamConfig{ID: "chatcmpl-x", Model: "m"})
	c := NewCompletionStream(StreamConfig{ID: "cmpl-x", Model: "m"})
	for _, tc := range []struct{ got, want string }{
		{string(s.AppendFinish(nil, "", Finish{}, nil)), `"finish_reason":"stop"`},
		{string(c.AppendFinish(nil, "", Finish{}, nil)), `"finish_reason":null`},
		{string(AppendChatCompletion(nil, &ChatCompletion{})), `"finish_reason":"stop"`},
		{string(AppendCompletion(nil, &Completion{})), `"finish_reason":null`},
	} {
		if !strings.Contains(tc.got, tc.want) {
			t.Errorf("%s lacks %s", tc.got, tc.want)
		}
	}
}

func TestStreamAllocs(t *testing.T) {
	s := NewChatStream(StreamConfig{ID: "chatcmpl-x", Model: "m", Fingerprint: "fp"})
	c := NewCompletionStream(StreamConfig{ID: "cmpl-x", Model: "m", Fingerprint: "fp"})
	buf := make([]byte, 0, 1024)
	u := &Usage{PromptTokens: 3, CompletionTokens: 1, Details: true}
	for name, fn := range map[string]func(){
		"chat content":       func() { buf = s.AppendContent(buf[:0], "tok \"x\" \u2028", u) },
		"chat role":          func() { buf = s.AppendRole(buf[:0], "assistant", nil) },
		"chat finish":        func() { buf = s.AppendFinish(buf[:0], "", Finish{Reason: "stop", Stop: StopString("###")}, u) },
		"chat usage":         func() { buf = s.AppendUsage(buf[:0], u) },
		"completion content": func() { buf = c.AppendContent(buf[:0], "tok", nil) },
		"completion finish":  func() { buf = c.AppendFinish(buf[:0], "", Finish{Reason: "length", Stop: StopToken(2)}, nil) },
		"done":               func() { buf = AppendDone(buf[:0]) },
	} {
		if n := testing.AllocsPerRun(100, fn); n != 0 {
			t.Errorf("%s allocates %v per chunk", name, n)
		}
	}
	defer func() {
		if recover() == nil {
			t.Error("AppendRole on a completion stream did not panic")
		}
	}()
	c.AppendRole(nil, "assistant", nil)
}
