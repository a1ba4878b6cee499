package main

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"

	"github.com/inferrail/inferrail/sim"
)

// mooncakeSlice is the first 300 requests of Mooncake's trace, kept with
// the workload package's tests.
const mooncakeSlice = "../../sim/workload/testdata/mooncake_first300.jsonl"

// bench run replays a trace's token-id prompts against a simulator, at
// the trace's own rate for as long as it lasts when neither is given.
func TestBenchRunTrace(t *testing.T) {
	opts := sim.DefaultOptions()
	opts.Port, opts.Engine.Latency.Zero, opts.EnablePromptTokensDetails = 0, true, true
	// The slice's 12th prompt is 87,169 tokens.
	opts.Engine.MaxModelLen, opts.Engine.NumBlocks = 128<<10, 16<<10
	s, err := sim.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var out, errOut bytes.Buffer
	// 10 requests at 0 s and 2 at 3 s, replayed ten times as fast.
	code := run([]string{"bench", "run", "--url", s.URL(), "--trace", mooncakeSlice, "--set", "limit = 12",
		"--speed", "10", "--warmup", "0s", "--model", opts.Model}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"12 of 300 requests kept", "speed 10", "replayed at 40 req/s for 325ms"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
		}
	}
	t.Log(out.String())
	// The two requests at 300 ms find the first block every prompt
	// starts with (id 0) cached.
	if !strings.Contains(out.String(), "12 requests, 0 errors") || strings.Contains(out.String(), "hit rate 0.000") {
		t.Errorf("summary:\n%s", out.String())
	}
}

func TestBenchCompareTraceVirtual(t *testing.T) {
	dir := t.TempDir()
	var out, errOut bytes.Buffer
	code := run([]string{"bench", "compare", "--virtual", "--trace", mooncakeSlice, "--set", "limit = 30",
		"--warmup", "0s", "--policies", "cost_model", "--out", filepath.Join(dir, "results")}, &out, &errOut)
	if code != 0 {
		t.Fatalf("exit %d\n%s\n%s", code, out.String(), errOut.String())
	}
	for _, want := range []string{"mooncake_first300.jsonl: 30 of 300 requests kept", "warning: point \"trace\": its longest request needs"} {
		if !strings.Contains(errOut.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut.String())
		}
	}
	if !strings.Contains(out.String(), `virtual sweep "compare-trace": 1 runs made`) {
		t.Errorf("output:\n%s", out.String())
	}
}

func TestBenchTraceFlagErrors(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"run", "--speed", "2"}, "--speed: only with --trace"},
		{[]string{"run", "--workload", "trace"}, "--workload trace: name the file with --trace"},
		{[]string{"run", "--workload", "W2", "--trace", mooncakeSlice}, "--trace and --workload W2"},
		{[]string{"run", "--trace", mooncakeSlice, "--set", "speeed = 2"}, "--set: unknown key speeed"},
		{[]string{"run", "--trace", mooncakeSlice, "--set", "speed = 2", "--speed", "3"}, "speed"},
		{[]string{"run", "--trace", mooncakeSlice, "--sample-requests", "2"}, "sample requests 2: want a share from 0 to 1"},
		{[]string{"compare", "--out", "x", "--from", "1s"}, "--from: only with --trace"},
		{[]string{"compare", "--out", "x", "--trace", "none.jsonl"}, "none.jsonl"},
	} {
		var out, errOut bytes.Buffer
		code := run(append([]string{"bench"}, tc.args...), &out, &errOut)
		if code == 0 || !strings.Contains(errOut.String(), tc.want) {
			t.Errorf("%q: exit %d, want an error with %q:\n%s", tc.args, code, tc.want, errOut.String())
		}
	}
}
