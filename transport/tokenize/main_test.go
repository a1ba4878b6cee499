package tokenize

import (
	"os"
	"sync"
	"testing"

	"go.uber.org/goleak"

	"github.com/inferrail/inferrail/config"
)

// TestMain fails the package when a test leaves a goroutine behind: every
// Pool's workers must be stopped and joined by Close. fasthttp keeps a few
// of its own past a simulator's Shutdown (see sim/server_test.go).
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.updateServerDate.func1"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*workerPool).Start.func2"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*TCPDialer).tcpAddrsClean"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*HostClient).connsCleaner"),
		goleak.IgnoreAnyFunction("github.com/valyala/fasthttp.(*Client).mCleaner"),
	)
}

// qwenDir and mistralDir hold the test tokenizers' tokenizer.json and
// tokenizer_config.json.
const (
	qwenDir    = "../../model/token/hf/testdata/qwen3"
	mistralDir = "../../model/token/hf/testdata/mistral7b"
)

var qwenOnce struct {
	sync.Once
	m   *Model
	err error
}

// qwen3 is the Qwen3 model loaded once (loading takes half a second) with
// a piece cache; tests share it, as the gateway's requests do.
func qwen3(t testing.TB) *Model {
	t.Helper()
	qwenOnce.Do(func() {
		qwenOnce.m, qwenOnce.err = Load(config.Model{Name: "Qwen/Qwen3-0.6B", Tokenizer: qwenDir, BlockSize: 16,
			ChatTemplateContentFormat: "auto"}, "", 1<<20)
	})
	if qwenOnce.err != nil {
		t.Fatal(qwenOnce.err)
	}
	return qwenOnce.m
}

func readFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
