package sweep

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"
)

// updateGolden rewrites testdata/golden-sim.txt from the code as it is.
var updateGolden = flag.Bool("update", false, "rewrite the golden bench sim results in testdata")

const goldenFile = "testdata/golden-sim.txt"

// goldenSweep is bench/sweeps/matrix.toml, every policy on every point,
// at each point's main rate only, once and shorter: what `inferrail bench
// sim --spec bench/sweeps/matrix.toml` runs, cut to a test's size.
func goldenSweep(t *testing.T) *Sweep {
	t.Helper()
	s, err := Load("../sweeps/matrix.toml")
	if err != nil {
		t.Fatal(err)
	}
	s.Repetitions = 1
	s.Duration, s.WarmUp = 40*time.Second, 10*time.Second
	for i := range s.Points {
		p := &s.Points[i]
		p.Rates = []float64{p.Main}
		p.Duration, p.WarmUp = s.Duration, s.WarmUp
	}
	return s
}

// simPicks writes a virtual run's decisions, one replica name per request
// ("-" for a failure).
func simPicks(records []string) string { return strings.Join(records, ",") }

// TestGoldenSim holds `inferrail bench sim` to the results it gave before
// the routing core moved to model/route: each run's result file, less its
// wall time, hashes the same, and every request went to the same replica
// (testdata/golden-sim.txt). Run with -update to capture them again, which
// only a change meant to alter decisions may do.
func TestGoldenSim(t *testing.T) {
	if testing.Short() {
		t.Skip("seventy virtual runs")
	}
	want := map[string]string{}
	if !*updateGolden {
		f, err := os.Open(goldenFile)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		sc := bufio.NewScanner(f)
		sc.Buffer(nil, 1<<24)
		for sc.Scan() {
			if k, v, ok := strings.Cut(sc.Text(), " "); ok && !strings.HasPrefix(k, "#") {
				want[k] = v
			}
		}
		if err := sc.Err(); err != nil {
			t.Fatal(err)
		}
	}
	var lines []string
	for _, spec := range goldenSweep(t).Plan("virtual") {
		run, err := Virtual{}.Run(context.Background(), spec)
		if err != nil {
			t.Fatal(err)
		}
		res := NewResult(spec, run)
		b, err := json.Marshal(res)
		if err != nil {
			t.Fatal(err)
		}
		sum := sha256.Sum256(b)
		reps := make([]string, len(run.Records))
		for i, r := range run.Records {
			reps[i] = strings.TrimPrefix(r.Replica, "sim-")
			if r.Err != "" {
				reps[i] = "-"
			}
		}
		key := strings.ReplaceAll(spec.File(), " ", "_")
		got := hex.EncodeToString(sum[:8]) + " " + simPicks(reps)
		lines = append(lines, key+" "+got)
		if *updateGolden {
			continue
		}
		switch w, ok := want[key]; {
		case !ok:
			t.Errorf("%s: no golden result", key)
		case w != got:
			wh, _, _ := strings.Cut(w, " ")
			t.Errorf("%s: result %s, want %s: the run decided otherwise than the golden one", key, got[:16], wh)
		}
	}
	if *updateGolden {
		out := fmt.Sprintf("# run-file result-hash picks: bench/sweeps/matrix.toml at each main rate (goldenSweep), in virtual time,\n"+
			"# captured before the routing core moved to model/route (least_request's again when its tie-break\n"+
			"# drew one number a decision instead of one a tie); TestGoldenSim holds the code to them.\n%s\n",
			strings.Join(lines, "\n"))
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenFile, []byte(out), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
