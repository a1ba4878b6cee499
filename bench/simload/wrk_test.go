package main

import (
	"strings"
	"testing"

	"github.com/inferrail/inferrail/bench/loadgen"
)

// wrkOutput is wrk 4.1's report for a run with loadgen.WrkScript, as captured.
const wrkOutput = `Running 2s test @ http://127.0.0.1:46625/v1/completions
  2 threads and 256 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     5.26ms    8.83ms 109.83ms   96.58%
    Req/Sec    30.17k     6.53k   38.93k    82.05%
  Latency Distribution
     50%    3.81ms
     75%    6.31ms
     90%    9.17ms
     99%   50.94ms
  117777 requests in 2.02s, 72.11MB read
Requests/sec:  58355.77
Transfer/sec:     35.73MB
INFERRAIL_WRK requests=117777 duration_us=2018258 bytes=75612834 connect=0 read=0 write=0 status=0 timeout=0 lat_mean_us=5263.5 lat_stdev_us=8828.3 lat_max_us=109830 p50_us=3813 p90_us=9172 p99_us=50939 p999_us=103465
`

func TestParseWrk(t *testing.T) {
	s, err := loadgen.ParseWrkSummary(wrkOutput)
	if err != nil {
		t.Fatal(err)
	}
	if s["requests"] != 117777 || s["duration_us"] != 2018258 || s["p99_us"] != 50939 || s["lat_mean_us"] != 5263.5 {
		t.Fatalf("summary %v", s)
	}
	txt, err := parseWrkText(wrkOutput)
	if err != nil {
		t.Fatal(err)
	}
	if txt.RequestsPerSec != 58355.77 || txt.Non2xx != 0 || txt.SocketErrors != 0 {
		t.Fatalf("text %+v", txt)
	}

	// wrk adds these lines only when they are not zero.
	failing := strings.Replace(wrkOutput, "Requests/sec:",
		"  Socket errors: connect 1, read 2, write 3, timeout 4\n  Non-2xx or 3xx responses: 12\nRequests/sec:", 1)
	txt, err = parseWrkText(failing)
	if err != nil {
		t.Fatal(err)
	}
	if txt.Non2xx != 12 || txt.SocketErrors != 10 {
		t.Fatalf("failing text %+v", txt)
	}

	if _, err := parseWrkText("nothing"); err == nil {
		t.Fatal("no Requests/sec: no error")
	}
}
