package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/config"
	"github.com/inferrail/inferrail/sim"
)

// TestCalibrateFragmentPassesCheck runs inferrail calibrate against a
// simulator and pastes the fragment it wrote into a config, under routing:
// and under a model's entry: inferrail check accepts both, the values are
// the simulator's, and decode_interference_secs keeps its default.
func TestCalibrateFragmentPassesCheck(t *testing.T) {
	opts := sim.DefaultOptions()
	opts.Port = 0
	opts.Engine.Latency.PrefillToken = 30 * time.Microsecond
	opts.Engine.Latency.PrefillPair = 2
	opts.Engine.Latency.PrefillFixed = 4 * time.Millisecond
	s, err := sim.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	dir := t.TempDir()
	frag := filepath.Join(dir, "cost.yaml")
	var stdout, stderr bytes.Buffer
	args := []string{"calibrate", "--url", s.URL(), "--out", frag, "--seed", "5",
		"--cached", "0,512", "--compute", "64,256,1024"}
	if code := run(args, &stdout, &stderr); code != 0 {
		t.Fatalf("calibrate: exit %d\n%s", code, stderr.String())
	}
	if n := strings.Count("\n"+stderr.String(), "\nprobe "); n != 6 {
		t.Fatalf("progress lines:\n%s", stderr.String())
	}
	b, err := os.ReadFile(frag)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("--seed 5 ")) || !bytes.Contains(b, []byte("model inferrail/sim-8b")) ||
		bytes.Contains(b, []byte("decode_interference_secs")) {
		t.Fatalf("fragment:\n%s", b)
	}
	indent := func(s []byte, n int) string {
		pad := strings.Repeat(" ", n)
		return pad + strings.ReplaceAll(strings.TrimRight(string(s), "\n"), "\n", "\n"+pad) + "\n"
	}
	base := "models:\n  - name: inferrail/sim-8b\n" +
		"replicas:\n  - {id: sim, url: " + s.URL() + ", models: [inferrail/sim-8b]}\n"
	want := config.Default().Routing.CostModel
	want.PrefillTokenSecs, want.PrefillPairSecs, want.PrefillFixedSecs = 30e-6, 2e-9, 4e-3
	for name, doc := range map[string]string{
		"routing": base + "routing:\n" + indent(b, 2),
		"model":   "models:\n  - name: inferrail/sim-8b\n" + indent(b, 4) + base[len("models:\n  - name: inferrail/sim-8b\n"):],
	} {
		path := filepath.Join(dir, name+".yaml")
		if err := os.WriteFile(path, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		stdout.Reset()
		stderr.Reset()
		if code := run([]string{"check", "--config", path}, &stdout, &stderr); code != 0 {
			t.Fatalf("%s: check: exit %d\n%s\n%s", name, code, stderr.String(), doc)
		}
		cfg, err := config.Parse([]byte(doc), nil)
		if err != nil {
			t.Fatal(err)
		}
		got := cfg.Routing.CostModel
		if name == "model" {
			got = *cfg.Models[0].CostModel
		}
		if got.DecodeInterferenceSecs != want.DecodeInterferenceSecs {
			t.Fatalf("%s: decode_interference_secs %g, want the default %g", name, got.DecodeInterferenceSecs, want.DecodeInterferenceSecs)
		}
		for _, p := range [][2]float64{{got.PrefillTokenSecs, want.PrefillTokenSecs},
			{got.PrefillPairSecs, want.PrefillPairSecs}, {got.PrefillFixedSecs, want.PrefillFixedSecs}} {
			if math.Abs(p[0]-p[1]) > 0.001*p[1] {
				t.Fatalf("%s: cost_model %+v, want %+v", name, got, want)
			}
		}
	}

	// Without --out the fragment goes to stdout.
	stdout.Reset()
	stderr.Reset()
	args = []string{"calibrate", "--url", s.URL(), "--cached", "0,512", "--compute", "64,256"}
	if code := run(args, &stdout, &stderr); code != 0 || !strings.Contains(stdout.String(), "\ncost_model:\n") {
		t.Fatalf("calibrate: exit %d\n%s\n%s", code, stdout.String(), stderr.String())
	}
}

func TestCalibrateUsage(t *testing.T) {
	f := func(want int, args ...string) {
		t.Helper()
		var stdout, stderr bytes.Buffer
		if code := run(append([]string{"calibrate"}, args...), &stdout, &stderr); code != want {
			t.Fatalf("calibrate %v: exit %d, want %d\n%s", args, code, want, stderr.String())
		}
	}
	f(0, "--help")
	f(2)
	f(2, "--url", "http://127.0.0.1:1", "--compute", "64")
	f(2, "--url", "http://127.0.0.1:1", "--cached", "x")
	f(1, "--url", "http://127.0.0.1:1")
}
