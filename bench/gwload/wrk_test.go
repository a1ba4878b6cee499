package main

import (
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/inferrail/inferrail/bench/loadgen"
)

// wrkSum is a wrk summary of requests over durationUs, with timeouts.
func wrkSum(requests, durationUs, timeouts float64) loadgen.WrkSummary {
	s := loadgen.WrkSummary{}
	for _, k := range loadgen.WrkSummaryKeys {
		s[k] = 0
	}
	s["requests"], s["duration_us"], s["timeout"], s["p50_us"], s["p99_us"] = requests, durationUs, timeouts, 3000, 7000
	return s
}

// TestRunWrk runs the real wrk (when installed) through runWrk against a
// server that fails one answer in ten once told to, and checks that the
// run's requests and failures are what the server saw.
func TestRunWrk(t *testing.T) {
	bin, err := exec.LookPath("wrk")
	if err != nil {
		t.Skip("no wrk (scripts/bench-gateway.sh installs it)")
	}
	var served, failing atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if served.Add(1)%10 == 0 && failing.Load() > 0 {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	script := filepath.Join(t.TempDir(), "completions.lua")
	if err := os.WriteFile(script, []byte(loadgen.WrkScript("test", []byte(`{}`))), 0o644); err != nil {
		t.Fatal(err)
	}
	c := &config{wrk: bin, wrkThreads: 1, wrkConns: 2}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, fail := range []bool{false, true} {
		if fail {
			failing.Store(1)
		}
		served.Store(0)
		run, err := runWrk(ctx, c, &setup{}, target{Name: "test", URLs: []string{srv.URL}}, script, time.Second, 1)
		if err != nil {
			t.Fatal(err)
		}
		n := run.Result["requests"]
		if run.Round != 1 || run.Target != "test" || n == 0 || n > float64(served.Load()) || run.WrkCPUS <= 0 {
			t.Fatalf("%+v; the server saw %d", run, served.Load())
		}
		if fail != (run.errors() > 0) || fail && float64(run.errors()) > n/10+1 {
			t.Fatalf("server failing %v: %d errors of %v", fail, run.errors(), n)
		}
	}
}
