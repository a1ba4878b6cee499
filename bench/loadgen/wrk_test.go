package loadgen

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const wrkSummaryLine = "INFERRAIL_WRK requests=117777 duration_us=2018258 bytes=75612834 connect=0 read=1 write=0 status=2 timeout=3 " +
	"lat_mean_us=5263.5 lat_stdev_us=8828.3 lat_max_us=109830 p50_us=3813 p90_us=9172 p99_us=50939 p999_us=103465"

func TestParseWrkSummary(t *testing.T) {
	s, err := ParseWrkSummary("Running 2s test @ http://127.0.0.1:1/v1/completions\nRequests/sec:  58355.77\n" + wrkSummaryLine + "\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(s) != len(WrkSummaryKeys) || s["requests"] != 117777 || s["duration_us"] != 2018258 || s["p99_us"] != 50939 ||
		s["lat_mean_us"] != 5263.5 || s.SocketErrors() != 4 || s["status"] != 2 {
		t.Fatalf("summary %v", s)
	}
	if rps := s.RequestsPerSec(); rps < 58355 || rps > 58356 {
		t.Fatalf("req/s %v", rps)
	}
	if s.String() != wrkSummaryLine {
		t.Fatalf("String() = %q", s.String())
	}
}

func TestParseWrkSummaryRejects(t *testing.T) {
	for _, out := range []string{
		"",
		"Requests/sec: 1\n",
		"INFERRAIL_WRK requests=1\n", // keys missing
		strings.Replace(wrkSummaryLine, " p999_us=103465", "", 1),
		wrkSummaryLine + " p99_us=1",                                        // a key twice
		wrkSummaryLine + " extra=1",                                         // an unknown key
		wrkSummaryLine + " bare",                                            // no value
		strings.Replace(wrkSummaryLine, "requests=117777", "requests=x", 1), // not a number
		strings.Replace(wrkSummaryLine, "requests=117777", "requests=-1", 1),
		strings.Replace(wrkSummaryLine, "requests=117777", "requests=NaN", 1),
		strings.Replace(wrkSummaryLine, "requests=117777", "requests=+Inf", 1),
		strings.Replace(wrkSummaryLine, "duration_us=2018258", "duration_us=0", 1),
		wrkSummaryLine + "\n" + wrkSummaryLine, // two lines
		strings.Replace(wrkSummaryLine, "INFERRAIL_WRK", "INFERRAIL_WRK:", 1),
	} {
		if s, err := ParseWrkSummary(out); err == nil {
			t.Errorf("%q parsed as %v", out, s)
		}
	}
}

// FuzzParseWrkSummary: any output either has no summary, or one with every
// key, no figure below zero, and a line that prints back the same.
func FuzzParseWrkSummary(f *testing.F) {
	f.Add(wrkSummaryLine)
	f.Add("x\n" + wrkSummaryLine + "\ny")
	f.Add("INFERRAIL_WRK requests=1 requests=1")
	f.Fuzz(func(t *testing.T, out string) {
		s, err := ParseWrkSummary(out)
		if err != nil {
			return
		}
		if len(s) != len(WrkSummaryKeys) || s["duration_us"] <= 0 || s.RequestsPerSec() < 0 || s.SocketErrors() < 0 {
			t.Fatalf("%q parsed as %v", out, s)
		}
		again, err := ParseWrkSummary(s.String())
		if err != nil {
			t.Fatalf("%q → %q: %v", out, s.String(), err)
		}
		for _, k := range WrkSummaryKeys {
			if again[k] != s[k] {
				t.Fatalf("%q: %s %v came back as %v", out, k, s[k], again[k])
			}
		}
	})
}

func TestLuaString(t *testing.T) {
	f := func(in, want string) {
		t.Helper()
		if got := LuaString(in); got != want {
			t.Errorf("LuaString(%q) = %s, want %s", in, got, want)
		}
	}
	f(`{"a":1}`, `"{\034a\034:1}"`)
	f("x\ny", `"x\010y"`)
	f(`back\slash`, `"back\092slash"`)
	f("é]==]", `"\195\169]==]"`)
	f("", `""`)
}

// TestWrkScript runs the script in the real wrk (when installed) against a
// server that checks every request, and reads wrk's summary back.
func TestWrkScript(t *testing.T) {
	bin, err := exec.LookPath("wrk")
	if err != nil {
		t.Skip("no wrk (scripts/bench-gateway.sh installs it)")
	}
	body := AppendBody(nil, "inferrail/sim-8b", Spec{MaxTokens: 1, Prompt: "say \"hi\"\\n]==]"})
	var served, wrong, failing atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got, _ := io.ReadAll(r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/v1/completions" || r.Header.Get("Content-Type") != "application/json" || !bytes.Equal(got, body) {
			wrong.Add(1)
		}
		if served.Add(1)%10 == 0 && failing.Load() > 0 {
			w.WriteHeader(http.StatusInternalServerError)
		}
	}))
	defer srv.Close()
	script := filepath.Join(t.TempDir(), "completions.lua")
	if err := os.WriteFile(script, []byte(WrkScript("loadgen test", body)), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, fail := range []bool{false, true} {
		if fail {
			failing.Store(1)
		}
		served.Store(0)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		out, err := exec.CommandContext(ctx, bin, "-t1", "-c2", "-d1s", "-s", script, srv.URL+"/v1/completions").CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		s, err := ParseWrkSummary(string(out))
		if err != nil {
			t.Fatalf("%v: %s", err, out)
		}
		if wrong.Load() != 0 || s["requests"] == 0 || s["requests"] > float64(served.Load()) || s["duration_us"] < 900000 {
			t.Fatalf("%d wrong requests; wrk %v, server saw %d", wrong.Load(), s, served.Load())
		}
		if fail != (s["status"] > 0) {
			t.Fatalf("server failing %v: wrk counted %v failed answers", fail, s["status"])
		}
	}
	if v := WrkVersion(bin); !strings.HasPrefix(v, "wrk ") {
		t.Errorf("WrkVersion = %q", v)
	}
}
