package stress

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestCheckLeaks(t *testing.T) {
	ctx := context.Background()
	bounds := leakBounds{Goroutines: 2, FDs: 2, Settle: 300 * time.Millisecond}
	before, err := currentUsage()
	if err != nil {
		t.Fatal(err)
	}
	// Ten goroutines and five open files that outlive the "scenario".
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 10 {
		wg.Go(func() { <-stop })
	}
	var files []*os.File
	for range 5 {
		f, err := os.Open(os.DevNull)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	lc := checkLeaks(ctx, before, bounds)
	if !lc.Leaked {
		t.Fatalf("10 goroutines and 5 files not reported: %s", lc)
	}
	if lc.Waited < bounds.Settle {
		t.Errorf("gave up after %v, before the settle time %v", lc.Waited, bounds.Settle)
	}
	if !strings.Contains(lc.Dump, "TestCheckLeaks") || !strings.Contains(lc.Dump, "/dev/null ") {
		t.Errorf("dump does not show the goroutines and files:\n%s", lc.Dump)
	}

	// They end a little after the check starts: within the settle time,
	// nothing leaked.
	var ender sync.WaitGroup
	ender.Go(func() {
		time.Sleep(100 * time.Millisecond)
		close(stop)
		for _, f := range files {
			f.Close()
		}
	})
	lc = checkLeaks(ctx, before, leakBounds{Goroutines: 2, FDs: 2, Settle: 5 * time.Second})
	ender.Wait()
	wg.Wait()
	if lc.Leaked {
		t.Fatalf("reported a leak that ended: %s\n%s", lc, lc.Dump)
	}
	if lc.Waited < 50*time.Millisecond {
		t.Errorf("passed after %v, before the goroutines ended", lc.Waited)
	}
}

func TestCheckLeaksTolerance(t *testing.T) {
	before, err := currentUsage()
	if err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() { <-stop })
	defer func() {
		close(stop)
		wg.Wait()
	}()
	lc := checkLeaks(context.Background(), before, leakBounds{Goroutines: 2, FDs: 2, Settle: time.Second, Quiet: 200 * time.Millisecond})
	if lc.Leaked {
		t.Fatalf("one goroutine over a tolerance of two reported: %s", lc)
	}
	if lc.Waited < 200*time.Millisecond {
		t.Errorf("passed above the baseline after %v, before the quiet time", lc.Waited)
	}
	if lc := checkLeaks(context.Background(), before, leakBounds{Settle: 100 * time.Millisecond}); !lc.Leaked {
		t.Fatalf("one goroutine over a tolerance of zero not reported: %s", lc)
	}
}

func TestTailBuffer(t *testing.T) {
	b := newTailBuffer(8)
	b.Write([]byte("hello "))
	b.Write([]byte("world"))
	if got := b.String(); got != "lo world" {
		t.Fatalf("tail = %q", got)
	}
	b.Write([]byte("0123456789"))
	if got := b.String(); got != "23456789" {
		t.Fatalf("tail = %q", got)
	}
}

func TestTail(t *testing.T) {
	var tl tail
	tl.add([]byte("data: x\n\n"))
	if got := string(tl.bytes()); got != "data: x\n\n" {
		t.Fatalf("tail = %q", got)
	}
	tl.add([]byte(strings.Repeat("y", 100)))
	tl.add([]byte("data: [DONE]\n\n"))
	got := string(tl.bytes())
	if len(got) != 64 || !strings.HasSuffix(got, strings.Repeat("y", 50)+"data: [DONE]\n\n") {
		t.Fatalf("tail = %q", got)
	}
}

func TestPlanLeaves(t *testing.T) {
	plans := planLeaves(8, 1000, 48)
	if len(plans) != 1000 {
		t.Fatalf("%d plans", len(plans))
	}
	counts := map[leaveKind]int{}
	for _, p := range plans {
		counts[p.kind]++
		if p.kind == leaveMid && (p.after < 1 || p.after > 24) {
			t.Fatalf("leaves after %d events of 48", p.after)
		}
	}
	// About 25% stay, 5% leave early, 10% in the head, 60% mid-stream.
	for k, want := range map[leaveKind]int{stayToEnd: 250, leaveEarly: 50, leaveInHead: 100, leaveMid: 600} {
		if d := counts[k] - want; d < -want/3 || d > want/3 {
			t.Errorf("kind %d: %d of 1000, want about %d", k, counts[k], want)
		}
	}
	again := planLeaves(8, 1000, 48)
	for i := range plans {
		if plans[i] != again[i] {
			t.Fatal("the same seed planned differently")
		}
	}
}

func TestWriteTable(t *testing.T) {
	var b strings.Builder
	WriteTable(&b, []*Result{
		{Name: "a", Title: "first | with a pipe", Figures: []string{"x 1", "y\n2"}, Bound: "b", Duration: 1500 * time.Millisecond},
		{Name: "b", Title: "second", Failures: []string{"missed"}, Duration: time.Second},
	})
	out := b.String()
	for _, want := range []string{
		`| 1 | first \| with a pipe | x 1; y 2 | b | PASS | 1.5s | 0.00 / 0.00 |`,
		`| 2 | second |  |  | **FAIL** | 1s |`,
		"- b: missed",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
}

// Issue 8: the whole suite runs in under 20 minutes; each scenario's time
// bound makes sure of it.
func TestLimitsAddUp(t *testing.T) {
	var total time.Duration
	names := map[string]bool{}
	for _, s := range suite() {
		if s.limit <= 0 || s.run == nil || s.name == "" || s.title == "" || s.bound == "" {
			t.Errorf("scenario %q is incomplete", s.name)
		}
		if names[s.name] {
			t.Errorf("two scenarios named %q", s.name)
		}
		names[s.name] = true
		total += s.limit
	}
	if total+time.Minute > 20*time.Minute {
		t.Fatalf("scenario limits add up to %v; with the warm-up that is over 20 minutes", total)
	}
	if len(names) != 19 {
		t.Fatalf("%d scenarios; issue 8 lists 12, the decision log and the control plane make 14, issue 12's partial page and tokenizer 16, and issue 15's tenants, overload and fairness 19", len(names))
	}
}
