package whatif

import (
	"context"
	"encoding/json"
	"encoding/xml"
	"errors"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/sim/workload"
)

// tinyPlan is W1 at a rate one simulated engine cannot carry within the
// SLO, two policies and an llm-d profile over 1 to 4 replicas.
func tinyPlan(t *testing.T) Plan {
	t.Helper()
	w := workload.W1()
	w.Prompts = 4
	routes, err := ParseRoutes([]string{"round_robin", "cost_model", "llmd-sticky"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	e, _ := Preset("sim")
	return Plan{
		Workload: &w, Rate: 4, Requests: 150, Key: "tiny W1",
		Routes: routes, Replicas: []int{1, 2, 3, 4}, Scales: []float64{1, 2},
		Engine: e, SLO: SLO{TTFT: 2 * time.Second, TPOT: 100 * time.Millisecond},
		Seed: 1, Fanout: 16, Knee: 1,
	}
}

// A sweep finds each policy's fewest replicas from the points it ran, and a
// second sweep over the same directory runs nothing and reports the same.
func TestSweepResumes(t *testing.T) {
	dir := t.TempDir()
	p := tinyPlan(t)
	rep, err := Sweep(context.Background(), p, Options{Dir: dir, Jobs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Ran == 0 || rep.Resumed != 0 || rep.Ran != len(rep.Points) {
		t.Fatalf("first sweep: ran %d, resumed %d, %d points", rep.Ran, rep.Resumed, len(rep.Points))
	}
	if len(rep.Fewest) != len(p.Routes)*len(p.Scales) {
		t.Fatalf("%d answers", len(rep.Fewest))
	}
	for _, f := range rep.Fewest {
		for _, pt := range rep.Points {
			if pt.Route == f.Route && pt.Scale == f.Scale && pt.Meets && (f.Replicas == 0 || pt.Replicas < f.Replicas) {
				t.Fatalf("%s at %g: fewest %d, but %d replicas met the SLO", f.Route, f.Scale, f.Replicas, pt.Replicas)
			}
		}
	}
	// One engine cannot meet the SLO at 4 req/s, so the search asked
	// about more.
	var met bool
	for _, f := range rep.Fewest {
		met = met || f.Replicas > 1
	}
	if !met {
		t.Fatalf("no policy needed more than one replica: %+v", rep.Fewest)
	}
	files, _ := filepath.Glob(filepath.Join(dir, "points", "*.json"))
	if len(files) != rep.Ran {
		t.Fatalf("%d result files for %d points", len(files), rep.Ran)
	}

	again, err := Sweep(context.Background(), p, Options{Dir: dir, Jobs: 2})
	if err != nil {
		t.Fatal(err)
	}
	if again.Ran != 0 || again.Resumed != rep.Ran {
		t.Fatalf("second sweep: ran %d, resumed %d of %d", again.Ran, again.Resumed, rep.Ran)
	}
	if !reflect.DeepEqual(again.Points, rep.Points) || !reflect.DeepEqual(again.Fewest, rep.Fewest) {
		t.Fatal("the resumed sweep reports differently")
	}

	// A different SLO is a different point: nothing is resumed.
	p.SLO.TTFT = time.Second
	p.Replicas, p.Scales, p.Routes = []int{2}, []float64{1}, p.Routes[:1]
	other, err := Sweep(context.Background(), p, Options{Dir: dir, Jobs: 1})
	if err != nil {
		t.Fatal(err)
	}
	if other.Ran != 1 || other.Resumed != 0 {
		t.Fatalf("changed SLO: ran %d, resumed %d", other.Ran, other.Resumed)
	}
}

// With All, every point runs.
func TestSweepAll(t *testing.T) {
	p := tinyPlan(t)
	p.All, p.Routes, p.Scales = true, p.Routes[:1], []float64{1}
	rep, err := Sweep(context.Background(), p, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Points) != 4 || rep.Searched {
		t.Fatalf("%d points, searched %v", len(rep.Points), rep.Searched)
	}
}

func TestSweepInvalid(t *testing.T) {
	p := tinyPlan(t)
	p.Replicas, p.Scales, p.Requests = []int{0}, []float64{-1}, 0
	_, err := Sweep(context.Background(), p, Options{Dir: t.TempDir()})
	for _, want := range []string{"replicas 0", "scale -1", "requests 0"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%v, want %q", err, want)
		}
	}
}

func TestSweepCancelled(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	p := tinyPlan(t)
	if _, err := Sweep(ctx, p, Options{Dir: t.TempDir()}); !errors.Is(err, context.Canceled) {
		t.Fatalf("%v", err)
	}
}

// FindRate brackets the highest rate round_robin sustains on two replicas:
// the point at the rate found meets the SLO and the one at Fails does not.
func TestFindRate(t *testing.T) {
	dir := t.TempDir()
	p := tinyPlan(t)
	f, err := FindRate(context.Background(), p, "round_robin", 2, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if !(f.Rate > 0 && f.Rate < f.Fails && f.Fails <= f.Rate*1.2) || f.Probes < findRate.Steps {
		t.Fatalf("%+v", f)
	}
	p.Routes, p.Replicas = p.Routes[:1], []int{2}
	p.Scales = []float64{f.Rate / p.Rate, f.Fails / p.Rate}
	rep, err := Sweep(context.Background(), p, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Ran != 0 || len(rep.Points) != 2 || !rep.Points[0].Meets || rep.Points[1].Meets {
		t.Fatalf("ran %d: %+v", rep.Ran, rep.Points)
	}
	if _, err := FindRate(context.Background(), p, "kv_aware", 2, Options{Dir: dir}); err == nil {
		t.Fatal("a policy not swept was searched")
	}
}

// The report's files: Markdown with the answer table and the charts it
// links, SVG documents that parse as XML, and JSON that reads back.
func TestReportWrite(t *testing.T) {
	rep := &Report{
		Workload: "W1 <test>", Input: "W1 <test> described", Rate: 2, Requests: 100, SLOTTFT: 2, SLOTPOT: 0.1,
		Routes: []string{"round_robin", "least_request", "cost_model"}, Replicas: []int{2, 4, 8}, Scales: []float64{1, 2},
		Searched: true,
	}
	rep.Engine, _ = Preset("h100-8b")
	need := []float64{4, 8, 2} // replicas each route needs at scale 1
	for _, s := range rep.Scales {
		for i, r := range rep.Routes {
			for _, n := range rep.Replicas {
				pt := point(r, s, n, float64(n) >= need[i]*s)
				pt.P99TTFT, pt.P99TPOT = 10/float64(n)*s, 0.5/float64(n)*s
				rep.Points = append(rep.Points, pt)
			}
		}
	}
	rep.Points = append(rep.Points, point("cost_model", 2, 1, false), // a count outside the sweep's list
		point("round_robin", 1, 16, false)) // noise above the fewest
	rep.Fewest = FewestReplicas(rep.Points, rep.Routes, rep.Scales, rep.Engine.GPUs, 8)
	rep.FoundRate = &FoundRate{Route: "round_robin", Replicas: 3, Rate: 2, Fails: 2.1, Probes: 9}
	dir := t.TempDir()
	if err := rep.Write(dir); err != nil {
		t.Fatal(err)
	}
	md, err := os.ReadFile(filepath.Join(dir, "report.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"| 1 | 2 | round_robin | 4 | 4 | 0 | 4 |",
		"| 1 | 2 | cost_model | 2 | 2 | 2 | 6 |",
		"| 2 | 4 | least_request | > 8 | – | – | – |",
		"| 2 | 4 | cost_model | 4 | 4 | 4 | ≥ 5 |",
		"![replicas needed](replicas.svg)", "(knee-1.svg)", "(knee-2.svg)", "(tpot-2.svg)",
		"p99 TTFT ≤ 2000 ms", "highest at which 3 `round_robin` replicas",
		"Not monotone: `round_robin` at scale 1 meets the SLO on 4 replicas but misses it on [16]",
	} {
		if !strings.Contains(string(md), want) {
			t.Errorf("report.md lacks %q:\n%s", want, md)
		}
	}
	for _, name := range []string{"replicas.svg", "knee-1.svg", "knee-2.svg", "tpot-1.svg", "tpot-2.svg"} {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		dec := xml.NewDecoder(strings.NewReader(string(b)))
		elems := 0
		for {
			tok, err := dec.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			if _, ok := tok.(xml.StartElement); ok {
				elems++
			}
		}
		if elems < 20 || !strings.Contains(string(b), "cost_model") || !strings.Contains(string(b), "W1 &lt;test&gt;") {
			t.Fatalf("%s: %d elements:\n%s", name, elems, b)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "report.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.Fewest, rep.Fewest) || len(back.Points) != len(rep.Points) {
		t.Fatal("report.json does not read back")
	}
	var sum strings.Builder
	rep.Summary(&sum)
	if !strings.Contains(sum.String(), "cost_model") || !strings.Contains(sum.String(), "> 8") {
		t.Fatalf("summary:\n%s", sum.String())
	}
}

func TestParseRoutes(t *testing.T) {
	routes, err := ParseRoutes(DefaultRoutes(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(routes) != len(DefaultRoutes()) || routes[len(routes)-1].Profile == nil || routes[0].Profile != nil {
		t.Fatalf("%+v", routes)
	}
	dir := t.TempDir()
	doc := filepath.Join(dir, "p.yaml")
	if err := os.WriteFile(doc, []byte(routes[len(routes)-1].Document), 0o644); err != nil {
		t.Fatal(err)
	}
	read := func(p string) ([]byte, error) { return os.ReadFile(p) }
	got, err := ParseRoutes([]string{"mine=" + doc}, read)
	if err != nil || got[0].Name != "mine" || got[0].Profile == nil {
		t.Fatalf("%+v, %v", got, err)
	}
	_, err = ParseRoutes([]string{"nope", "cost_model", "cost_model", "x=" + filepath.Join(dir, "missing")}, read)
	for _, want := range []string{`policy "nope"`, `"cost_model": named twice`, "policy x:"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Fatalf("%v, want %q", err, want)
		}
	}
}

// The fidelity check replays a request log's own fleet and compares.
func TestCheckFidelity(t *testing.T) {
	tr, err := workload.LoadTrace("testdata/requestlog.jsonl", workload.TraceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !tr.Logged() {
		t.Fatal("the test log has no measured TTFTs")
	}
	var obs []Logged
	for _, r := range tr.Records() {
		obs = append(obs, Logged{Policy: r.Policy, Replica: r.Replica, Input: r.InputLength, Cached: r.Cached,
			HasCached: r.HasCached, TTFT: r.TTFT, Measured: r.Measured})
	}
	policy, n, s, err := LoggedFleet(obs)
	if err != nil || policy != "cost_model" || n != 2 || s.Measured != 60 || !(s.P50TTFT > 0.04 && s.P99TTFT < 0.7) || !(s.HitRate > 0) {
		t.Fatalf("%s on %d: %+v, %v", policy, n, s, err)
	}
	p := tinyPlan(t)
	p.Workload, p.Rate, p.Requests, p.Key = tr, tr.Rate(), tr.Len(), "test log"
	fd, err := CheckFidelity(context.Background(), p, obs, Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if fd.Policy != "cost_model" || fd.Replicas != 2 || fd.Replayed.Requests != 60 || fd.Replayed.Replicas != 2 {
		t.Fatalf("%+v", fd)
	}
	if _, _, _, err := LoggedFleet([]Logged{{Input: 1}}); err == nil || !strings.Contains(err.Error(), "policy") {
		t.Fatalf("a log without fields: %v", err)
	}
}

// A warm-up leaves its requests out of the measures and makes other points
// than none.
func TestSweepWarmUp(t *testing.T) {
	dir := t.TempDir()
	p := tinyPlan(t)
	p.All, p.Routes, p.Replicas = true, p.Routes[:1], []int{2}
	cold, err := Sweep(context.Background(), p, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	p.WarmUp = 10 * time.Second
	warm, err := Sweep(context.Background(), p, Options{Dir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if warm.Ran != 2 || warm.WarmUpSeconds != 10 {
		t.Fatalf("ran %d, warm-up %v", warm.Ran, warm.WarmUpSeconds)
	}
	// 10 s hold about 40 requests at 4 req/s, 80 at scale 2.
	for i, pt := range warm.Points {
		left := cold.Points[i].Requests - pt.Requests
		if want := 40 * pt.Scale; cold.Points[i].Requests != p.Requests || float64(left) < want*0.6 || float64(left) > want*1.5 {
			t.Fatalf("scale %g: %d of %d requests measured", pt.Scale, pt.Requests, cold.Points[i].Requests)
		}
	}
}
