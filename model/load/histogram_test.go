package load_test

import (
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/inferrail/inferrail/model/load"
)

const ttft = "vllm:time_to_first_token_seconds"

func TestHistogram(t *testing.T) {
	f := func(page string, want load.Hist) {
		t.Helper()
		got, err := load.Histogram([]byte(page), ttft)
		if err != nil || got != want {
			t.Fatalf("Histogram(%q) = %+v, %v; want %+v", page, got, err, want)
		}
	}
	f("vllm:time_to_first_token_seconds_count 2.0\nvllm:time_to_first_token_seconds_sum 0.5\n", load.Hist{Sum: 0.5, Count: 2})
	// Ranks add up; an exact repeat of a series counts once, in any label order.
	f(`# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{engine="0",le="0.001"} 1.0
vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 3.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 0.25
vllm:time_to_first_token_seconds_count{engine="1",model_name="m"} 1.0
vllm:time_to_first_token_seconds_sum{engine="1",model_name="m"} 1.5
vllm:time_to_first_token_seconds_count{model_name="m",engine="1"} 1.0
vllm:time_to_first_token_seconds_sum{model_name="m",engine="1"} 1.5
vllm:time_to_first_token_seconds_created{engine="0",model_name="m"} 1.7e+09
vllm:time_to_first_token_seconds_sumx 7
vllm:inter_token_latency_seconds_sum 9
`, load.Hist{Sum: 1.75, Count: 4})
	// CRLF, a timestamp, an exemplar and no final newline.
	f("vllm:time_to_first_token_seconds_count 1 17\r\nvllm:time_to_first_token_seconds_sum 1e-3 # {a=\"b\"} 1", load.Hist{Sum: 0.001, Count: 1})
}

func TestHistogramUnreadable(t *testing.T) {
	f := func(page string) {
		t.Helper()
		if h, err := load.Histogram([]byte(page), ttft); !errors.Is(err, load.ErrUnreadable) {
			t.Fatalf("Histogram(%q) = %+v, %v; want ErrUnreadable", page, h, err)
		}
	}
	f("")
	f("vllm:time_to_first_token_seconds_count 1\n")
	f("vllm:time_to_first_token_seconds_sum 1\n")
	f("vllm:time_to_first_token_seconds_count 1\nvllm:time_to_first_token_seconds_sum NaN\n")
	f("vllm:time_to_first_token_seconds_count -1\nvllm:time_to_first_token_seconds_sum 1\n")
	f("vllm:time_to_first_token_seconds_count +Inf\nvllm:time_to_first_token_seconds_sum 1\n")
	f("vllm:time_to_first_token_seconds_count{engine=\"0\" 1\nvllm:time_to_first_token_seconds_sum 1\n")
	f("vllm:time_to_first_token_seconds_count one\nvllm:time_to_first_token_seconds_sum 1\n")
}

func TestHistogramFixtures(t *testing.T) {
	f := func(file string, want load.Hist, unreadable bool) {
		t.Helper()
		page, err := os.ReadFile(filepath.Join("testdata", file))
		if err != nil {
			t.Fatal(err)
		}
		got, err := load.Histogram(page, ttft)
		if unreadable {
			if !errors.Is(err, load.ErrUnreadable) {
				t.Fatalf("%s: %+v, %v; want ErrUnreadable", file, got, err)
			}
			return
		}
		if err != nil || got != want {
			t.Fatalf("%s: %+v, %v; want %+v", file, got, err, want)
		}
	}
	f("vllm_sim.prom", load.Hist{Sum: 0.182027, Count: 2}, false)
	f("vllm_dp2.prom", load.Hist{}, true) // rank 1's sum is NaN
	f("sglang_dp2.prom", load.Hist{}, true)
}

// FuzzHistogram: any page never panics, and reads as unreadable or as
// totals within their documented ranges.
func FuzzHistogram(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.prom"))
	for _, name := range files {
		b, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("vllm:time_to_first_token_seconds_count{engine=\"0\\\"\"} 1 17\r\nvllm:time_to_first_token_seconds_sum 0x1p-3 # {a=\"b\"} 1"))
	f.Fuzz(func(t *testing.T, page []byte) {
		h, err := load.Histogram(page, ttft)
		if err != nil {
			if !errors.Is(err, load.ErrUnreadable) || h != (load.Hist{}) {
				t.Fatalf("%+v with error %v", h, err)
			}
			return
		}
		if math.IsNaN(h.Sum) || !(h.Count >= 0) || math.IsInf(h.Count, 0) {
			t.Fatalf("totals out of range: %+v", h)
		}
	})
}

func ExampleHistogram() {
	before := []byte(`vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 2.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 0.25
`)
	after := []byte(`vllm:time_to_first_token_seconds_count{engine="0",model_name="m"} 3.0
vllm:time_to_first_token_seconds_sum{engine="0",model_name="m"} 0.3125
`)
	h0, _ := load.Histogram(before, "vllm:time_to_first_token_seconds")
	h1, _ := load.Histogram(after, "vllm:time_to_first_token_seconds")
	fmt.Printf("%g request(s), TTFT %g s\n", h1.Count-h0.Count, h1.Sum-h0.Sum)
	// Output:
	// 1 request(s), TTFT 0.0625 s
}
