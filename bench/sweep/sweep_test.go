package sweep

import (
	"bytes"
	"context"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferrail/inferrail/bench/harness"
)

const small = `
name = "small"
replicas = 2
duration = "30s"
warmup = "10s"
repetitions = 2
seed = 4
policies = ["round_robin", "cost_model"]

[[point]]
name = "W1"
workload = "W1"
rates = [2, 3]
main = 3
[point.set]
prompts = 8
system_tokens = [500, 1500]

[[point]]
name = "mix"
workload = "mix"
rates = [2]
duration = "20s"
[point.set.w1]
prompts = 2
system_tokens = 600
`

func mustParse(t *testing.T, text string) *Sweep {
	t.Helper()
	s, err := Parse(text, ".")
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestParse(t *testing.T) {
	s := mustParse(t, small)
	if s.Fanout != 16 || s.TTFT != 2*time.Second || len(s.Points) != 2 {
		t.Fatalf("defaults: %+v", s)
	}
	mix := s.Points[1]
	if mix.Main != 2 || mix.Duration != 20*time.Second || mix.WarmUp != 10*time.Second || mix.Replicas != 2 {
		t.Fatalf("point defaults: %+v", mix)
	}
	runs := s.Plan("virtual")
	if !strings.Contains(string(runs[0].Params), `"prompts":8`) || !strings.Contains(string(runs[0].Params), `"system_tokens":[500,1500]`) {
		t.Fatalf("overrides not applied: %s", runs[0].Params)
	}
	if !strings.Contains(string(runs[len(runs)-1].Params), `"system_tokens":[600,600]`) {
		t.Fatalf("nested overrides not applied: %s", runs[len(runs)-1].Params)
	}

	_, err := Parse(`
name = "a/b"
repetitions = 0
policies = ["round_robin", "fastest"]
colour = "blue"
[[point]]
name = "W1"
workload = "W1"
rates = [2, -1]
main = 5
duration = "10s"
warmup = "20s"
replicas = 1
[point.set]
prompts = 0
flavour = 1
[[point]]
name = "W1"
workload = "W7"
rates = [1]
`, ".")
	for _, want := range []string{`name "a/b"`, "repetitions 0", `unknown policy "fastest"`, "unknown key colour",
		"unknown key point.set.flavour", "rate -1", "main 5: not one of its rates", "warmup 20s", `name "W1": want a unique name`,
		`unknown workload "W7"`, "W1: prompts 0"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("error does not mention %q:\n%v", want, err)
		}
	}
}

// Policies run innermost, every policy of a repetition on the same seed,
// each repetition on a new one.
func TestPlanOrder(t *testing.T) {
	runs := mustParse(t, small).Plan("virtual")
	if len(runs) != (2+1)*2*2 {
		t.Fatalf("%d runs", len(runs))
	}
	var got []string
	for _, r := range runs[:4] {
		got = append(got, r.Point+" "+num(r.Rate)+" "+r.Policy+" "+num(float64(r.Repetition))+" "+num(float64(r.Seed)))
	}
	want := []string{"W1 2 round_robin 0 4000", "W1 2 cost_model 0 4000", "W1 2 round_robin 1 4001", "W1 2 cost_model 1 4001"}
	if !slices.Equal(got, want) {
		t.Fatalf("order %q, want %q", got, want)
	}
	files := map[string]bool{}
	hashes := map[string]bool{}
	for _, r := range runs {
		files[r.File()] = true
		hashes[r.Hash()] = true
	}
	if len(files) != len(runs) || len(hashes) != len(runs) {
		t.Fatalf("%d files, %d hashes for %d runs", len(files), len(hashes), len(runs))
	}
}

// fakeRunner makes a tiny Run instantly and counts calls and how many run
// at once.
type fakeRunner struct {
	calls, running, most atomic.Int32
	fail                 string        // a policy whose runs fail
	hold                 chan struct{} // when set, each run waits for a token
	entered              chan struct{} // when set, each run says it started
}

func (f *fakeRunner) Run(_ context.Context, spec *RunSpec) (*harness.Run, error) {
	f.calls.Add(1)
	n := f.running.Add(1)
	defer f.running.Add(-1)
	for {
		m := f.most.Load()
		if n <= m || f.most.CompareAndSwap(m, n) {
			break
		}
	}
	if f.entered != nil {
		f.entered <- struct{}{}
	}
	if f.hold != nil {
		<-f.hold
	}
	if spec.Policy == f.fail {
		return nil, os.ErrInvalid
	}
	return &harness.Run{WarmUp: spec.WarmUp, Duration: spec.Duration, Records: []harness.Record{
		{Due: spec.WarmUp, TTFT: time.Duration(spec.Rate * float64(time.Second)), E2E: 2 * time.Second, OutputTokens: 10, PromptTokens: 100, Replica: "sim-0"},
	}}, nil
}

func TestExecuteResumes(t *testing.T) {
	dir := t.TempDir()
	s := mustParse(t, small)
	runs := s.Plan("virtual")
	f := &fakeRunner{fail: "cost_model"}
	ran, skipped, err := Execute(context.Background(), runs, f, Options{Dir: dir, Jobs: 2})
	if err == nil || ran != len(runs)/2 || skipped != 0 || !strings.Contains(err.Error(), "cost_model") {
		t.Fatalf("first pass: ran %d, skipped %d, err %v", ran, skipped, err)
	}
	// The failed runs left no file and run again; the rest are skipped.
	f.fail = ""
	ran, skipped, err = Execute(context.Background(), runs, f, Options{Dir: dir})
	if err != nil || ran != len(runs)/2 || skipped != len(runs)/2 {
		t.Fatalf("resume: ran %d, skipped %d, err %v", ran, skipped, err)
	}
	// A changed specification reruns; a damaged file reruns.
	s.Points[0].WarmUp = 5 * time.Second
	changed := s.Plan("virtual")
	if err := os.WriteFile(filepath.Join(dir, changed[len(changed)-1].File()), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	ran, skipped, err = Execute(context.Background(), changed, f, Options{Dir: dir})
	if err != nil || ran != 8+1 || skipped != len(runs)-9 {
		t.Fatalf("changed: ran %d, skipped %d, err %v", ran, skipped, err)
	}
	res, err := ReadResults(dir)
	if err != nil || len(res) != len(runs) {
		t.Fatalf("%d results, %v", len(res), err)
	}
	for _, r := range res {
		if r.Hash != r.Spec.Hash() {
			t.Fatalf("%s: hash %s does not match its spec", r.Spec.File(), r.Hash)
		}
	}
}

func TestExecuteJobs(t *testing.T) {
	runs := mustParse(t, small).Plan("virtual")
	f := &fakeRunner{hold: make(chan struct{}), entered: make(chan struct{}, len(runs))}
	var progress bytes.Buffer
	var wg sync.WaitGroup
	wg.Go(func() {
		if _, _, err := Execute(context.Background(), runs, f, Options{Dir: t.TempDir(), Jobs: 3, Progress: &progress}); err != nil {
			t.Error(err)
		}
	})
	for range 3 {
		<-f.entered // three running, none let go
	}
	for range runs {
		f.hold <- struct{}{}
	}
	wg.Wait()
	if f.most.Load() != 3 || int(f.calls.Load()) != len(runs) {
		t.Fatalf("%d calls, at most %d at once; want %d and 3", f.calls.Load(), f.most.Load(), len(runs))
	}
	if !strings.Contains(progress.String(), "12/12 runs") || !strings.Contains(progress.String(), "ETA") {
		t.Fatalf("progress: %q", progress.String())
	}
}

// The report is built from result files alone and the same files always
// give the same bytes, whatever order they are read in.
func TestReportRebuiltByteForByte(t *testing.T) {
	dir := t.TempDir()
	runs := mustParse(t, small).Plan("virtual")
	if _, _, err := Execute(context.Background(), runs, Virtual{}, Options{Dir: dir, Jobs: 2}); err != nil {
		t.Fatal(err)
	}
	build := func(shuffle uint64) map[string][]byte {
		t.Helper()
		res, err := ReadResults(dir)
		if err != nil {
			t.Fatal(err)
		}
		rng := rand.New(rand.NewPCG(shuffle, 0))
		rng.Shuffle(len(res), func(i, j int) { res[i], res[j] = res[j], res[i] })
		files, err := Report(res)
		if err != nil {
			t.Fatal(err)
		}
		return files
	}
	a := build(1)
	out := t.TempDir()
	if err := WriteReport(out, a); err != nil {
		t.Fatal(err)
	}
	for _, seed := range []uint64{2, 3} {
		b := build(seed)
		if len(a) != len(b) {
			t.Fatalf("%d files, then %d", len(a), len(b))
		}
		for name, x := range a {
			if !bytes.Equal(x, b[name]) {
				t.Fatalf("%s differs between builds", name)
			}
		}
	}
	for name, x := range a {
		y, err := os.ReadFile(filepath.Join(out, name))
		if err != nil || !bytes.Equal(x, y) {
			t.Fatalf("%s written differently: %v", name, err)
		}
	}
	md := string(a["report.md"])
	for _, want := range []string{"### Verdicts", "cost_model's p99 TTFT on W1 (W1 at 3 req/s)", "W3: not measured",
		"### Headline", "| cost_model hit rate |", "#### W1 at 2 req/s", "#### mix at 2 req/s (main rate)",
		"By class", "![W1 knee](knee-virtual-small-W1.svg)"} {
		if !strings.Contains(md, want) {
			t.Errorf("report lacks %q", want)
		}
	}
	if len(a) != 3 || !bytes.HasPrefix(a["knee-virtual-small-W1.svg"], []byte("<?xml")) {
		t.Errorf("files %d: want the report and W1's two charts (mix has one rate)", len(a))
	}
}

// FuzzParse reads arbitrary text as a sweep file: an error naming the
// problems, or a sweep whose runs can be planned, never a panic.
func FuzzParse(f *testing.F) {
	if b, err := os.ReadFile("../sweeps/matrix.toml"); err == nil {
		f.Add(string(b))
	}
	f.Add("name = \"x\"\nreplicas = 1\nduration = \"1s\"\nrepetitions = 1\npolicies = [\"round_robin\"]\n[[point]]\nname = \"W1\"\nworkload = \"W1\"\nrates = [1]\nmain = 1\n")
	f.Add("[[point]]\nworkload = \"W2\"\n[point.set]\nsharegpt = \"/dev/null\"\n")
	if b, err := os.ReadFile("../sweeps/llmd.toml"); err == nil {
		if model, err := filepath.Abs("../../model"); err == nil {
			// Its profiles' files, found from the fuzz target's directory.
			f.Add(strings.ReplaceAll(string(b), "../../model", model))
		}
	}
	f.Add(withProfiles)
	if b, err := os.ReadFile("../sweeps/capacity.toml"); err == nil {
		// Its trace is outside the tree; the fuzzer mutates the rest.
		f.Add(string(b))
	}
	f.Add("llmd_profiles = true\n" + small + "[capacity]\nshare = 0.8\nscales = [1, 2]\ngrow = 1.25\nbracket = 3\nsteps = 2\nblind = [\"round_robin\"]\n")
	f.Add(small + "[[profile]]\nname = \"p\"\nfile = \"/dev/zero\"\n")
	f.Fuzz(func(t *testing.T, text string) {
		s, err := Parse(text, t.TempDir())
		if err != nil {
			return
		}
		for _, r := range s.Plan("virtual") {
			if r.Rate <= 0 || r.Policy == "" || r.File() == "" {
				t.Fatalf("planned run %+v", r)
			}
		}
	})
}

// A sweep whose plan would run into the billions is refused at once.
func TestPlanBounded(t *testing.T) {
	text := strings.Replace(small, "repetitions = 2", "repetitions = 100000000", 1)
	if _, err := Parse(text, ""); err == nil || !strings.Contains(err.Error(), "repetitions 100000000") {
		t.Fatalf("a hundred million repetitions: %v", err)
	}
}
