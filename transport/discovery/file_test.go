package discovery

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"
)

const twoEndpoints = `endpoints:
  - name: vllm-0
    namespace: default
    address: 10.0.0.21
    port: "8000"
    labels: {llm-d.ai/role: decode, app: vllm}
  - name: vllm-1
    address: 10.0.0.22
    port: 8001
    extra: ignored
`

func TestParseFile(t *testing.T) {
	eps, err := ParseFile([]byte(twoEndpoints))
	if err != nil {
		t.Fatal(err)
	}
	got := fmt.Sprint(eps)
	if want := "[{vllm-0 default 10.0.0.21 8000 map[app:vllm llm-d.ai/role:decode]} {vllm-1  10.0.0.22 8001 map[]}]"; got != want {
		t.Fatalf("entries:\n got %s\nwant %s", got, want)
	}
	if eps, err := ParseFile([]byte(`{"endpoints": [{"name": "a", "address": "10.1.1.1", "port": "80"}]}`)); err != nil || len(eps) != 1 {
		t.Fatalf("JSON: %v %v", eps, err)
	}
	if eps, err := ParseFile([]byte("endpoints: []")); err != nil || len(eps) != 0 {
		t.Errorf("empty list: %v %v", eps, err)
	}
	bad := func(doc, want string) {
		t.Helper()
		_, err := ParseFile([]byte(doc))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: error %v, want one with %q", doc, err, want)
		}
	}
	bad("", "no endpoints list")
	bad("# nothing\n", "no endpoints list")
	bad("endpoints:\n", "no endpoints list")
	bad("endpoints: [", "not an endpoint file")
	bad("endpoints: {name: a}", "not an endpoint file")
	bad("- a\n- b", "not an endpoint file")
	bad(`endpoints: [{address: 10.0.0.1, port: "80"}]`, "endpoints[0].name")
	bad(`endpoints: [{name: "a b", address: 10.0.0.1, port: "80"}]`, "endpoints[0].name")
	bad(`endpoints: [{name: a, address: 10.0.0.1, port: "80"}, {name: a, address: 10.0.0.2, port: "80"}]`, "endpoints[1].name: \"a\" is endpoints[0]'s too")
	bad(`endpoints: [{name: a, address: "fd00::1", port: "80"}]`, "endpoints[0].address")
	bad(`endpoints: [{name: a, address: "::ffff:10.0.0.1", port: "80"}]`, "endpoints[0].address")
	bad(`endpoints: [{name: a, address: vllm.svc, port: "80"}]`, "endpoints[0].address")
	bad(`endpoints: [{name: a, address: 10.0.0.1, port: "0"}]`, "endpoints[0].port")
	bad(`endpoints: [{name: a, address: 10.0.0.1, port: "65536"}]`, "endpoints[0].port")
	bad(`endpoints: [{name: a, address: 10.0.0.1}]`, "endpoints[0].port")
	bad(`endpoints: [{name: a, address: 10.0.0.1, port: "80", labels: [x]}]`, "not an endpoint file")
	bad(strings.Repeat("#", MaxFileBytes+1), "larger than")
}

// FuzzParseFile: no input panics or hangs, and what parses is what the
// format allows: IPv4 addresses, ports in range, unique valid names.
func FuzzParseFile(f *testing.F) {
	f.Add([]byte(twoEndpoints))
	f.Add([]byte(`{"endpoints": [{"name": "a", "address": "10.1.1.1", "port": "80"}]}`))
	f.Add([]byte("endpoints: [{name: a, address: 10.0.0.1, port: \"80\"}, {name: a, address: 10.0.0.2, port: \"80\"}]"))
	f.Add([]byte("endpoints: &a [*a]"))
	f.Add([]byte("endpoints:\n  - name: x\n    address: 255.255.255.255\n    port: 0x50\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		eps, err := ParseFile(b)
		if err != nil {
			return
		}
		seen := map[string]bool{}
		for _, e := range eps {
			if !e.Address.Is4() || e.Port < 1 || e.Port > 65535 || checkName(e.Name) != nil || seen[e.Name] {
				t.Fatalf("accepted %+v", e)
			}
			seen[e.Name] = true
		}
	})
}

// testClock is a clock the file watcher's reads are timed by.
type testClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *testClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

// nextSet returns the next set, skipping failure reports: an in-place
// rewrite may be read half-written, which is reported and then recovered.
func (s *RecordingSink) nextSet(t testing.TB) Call {
	t.Helper()
	for {
		if c := s.next(t); !c.Failure {
			return c
		}
	}
}

// drain discards calls until none has come for d.
func (s *RecordingSink) drain(d time.Duration) {
	for {
		select {
		case <-s.Calls:
		case <-time.After(d):
			return
		}
	}
}

// endpointIDs returns "id url" for each endpoint of a set call.
func endpointIDs(c Call) string {
	var out []string
	for _, ep := range c.Endpoints {
		out = append(out, ep.ID+" "+ep.URL)
	}
	return strings.Join(out, ", ")
}

// TestFileRewritten: the watched file rewritten by rename and in place
// (the same size, within the same timestamp tick) is followed; a bad
// rewrite (a parse error, over 1 MiB) and a deleted file keep the last
// good set and are said once each; a good rewrite recovers.
func TestFileRewritten(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "endpoints.yaml")
	write := func(doc string) {
		t.Helper()
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	rename := func(doc string) {
		t.Helper()
		tmp := filepath.Join(dir, ".endpoints.yaml.tmp")
		if err := os.WriteFile(tmp, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, path); err != nil {
			t.Fatal(err)
		}
	}
	// Every write gets one fixed time, so only the content tells versions
	// apart, as on a file system with coarse timestamps.
	stamp := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	touch := func() {
		t.Helper()
		if err := os.Chtimes(path, stamp, stamp); err != nil {
			t.Fatal(err)
		}
	}
	one := func(name, ip string) string {
		return fmt.Sprintf("endpoints: [{name: %s, address: %s, port: \"8000\"}]\n", name, ip)
	}
	write(twoEndpoints)
	touch()
	sink, set := NewRecordingSink(), metrics.NewSet()
	f := NewFile(path, Template{Scheme: "http", Models: []string{"m"}, MaxConcurrency: 1}, NewReporter("file", sink, nil, set))
	clk := &testClock{t: stamp.Add(time.Second)} // within the racy window
	f.now = clk.now
	if !f.Load() {
		t.Fatal("first load passed nothing on")
	}
	if got := endpointIDs(sink.next(t)); got != "vllm-0 http://10.0.0.21:8000, vllm-1 http://10.0.0.22:8001" {
		t.Fatalf("first set: %s", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); f.Run(ctx, 5*time.Millisecond) }()
	defer func() { cancel(); <-done }()

	// Rewritten atomically: a new file renamed over the old one.
	rename(one("vllm-2", "10.0.0.23"))
	touch()
	if got := endpointIDs(sink.next(t)); got != "vllm-2 http://10.0.0.23:8000" {
		t.Fatalf("after rename: %s", got)
	}
	// Rewritten in place with the same size and time. A look may catch
	// it truncated: reported as a failure, never passed on as an empty set.
	write(one("vllm-3", "10.0.0.24"))
	touch()
	if got := endpointIDs(sink.nextSet(t)); got != "vllm-3 http://10.0.0.24:8000" {
		t.Fatalf("after an in-place rewrite: %s", got)
	}
	sink.drain(50 * time.Millisecond)
	failures := func() string { return metric(set, `inferrail_discovery_failures_total{source="file"}`) }
	base := failures()

	// A rewrite that does not parse: said once, the last set kept.
	rename("endpoints: [{name: vllm-4, address: 10.0.0.25, port: \"8000\"}")
	c := sink.next(t)
	if !c.Failure || !strings.Contains(c.Failing, "written with an error") || !strings.Contains(c.Failing, path) {
		t.Fatalf("bad rewrite: %+v", c)
	}
	sink.none(t, 50*time.Millisecond)
	// Past the racy window the unchanged bad file is not reread, and
	// still not taken for good.
	clk.mu.Lock()
	clk.t = time.Now().Add(time.Hour)
	clk.mu.Unlock()
	sink.none(t, 50*time.Millisecond)

	// Over 1 MiB: another failure, said once.
	rename(one("vllm-5", "10.0.0.26") + "#" + strings.Repeat("x", MaxFileBytes))
	if c := sink.next(t); !c.Failure || !strings.Contains(c.Failing, "larger than") {
		t.Fatalf("large rewrite: %+v", c)
	}
	sink.none(t, 50*time.Millisecond)

	// Deleted: said, kept; back as the last good version: recovered
	// without a new set.
	if err := os.Remove(path); err != nil {
		t.Fatal(err)
	}
	if c := sink.next(t); !c.Failure || !strings.Contains(c.Failing, "cannot be read") {
		t.Fatalf("deleted: %+v", c)
	}
	rename(one("vllm-3", "10.0.0.24"))
	if c := sink.next(t); !c.Failure || c.Failing != "" {
		t.Fatalf("restored: %+v", c)
	}
	sink.none(t, 50*time.Millisecond)
	if got, want := failures(), fmt.Sprint(mustAtoi(t, base)+3); got != want {
		t.Errorf("failures = %s, want %s (bad YAML, too large, deleted)", got, want)
	}

	// A good rewrite in place is followed again.
	write(twoEndpoints)
	if got := endpointIDs(sink.nextSet(t)); !strings.HasPrefix(got, "vllm-0 ") {
		t.Fatalf("after recovery: %s", got)
	}
}

func mustAtoi(t testing.TB, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("%q: %v", s, err)
	}
	return n
}
