package loadgen

import (
	"testing"
	"time"
)

func TestPercentile(t *testing.T) {
	ms := func(xs ...int) []time.Duration {
		out := make([]time.Duration, len(xs))
		for i, x := range xs {
			out[i] = time.Duration(x) * time.Millisecond
		}
		return out
	}
	f := func(xs []time.Duration, p float64, want time.Duration) {
		t.Helper()
		if got := Percentile(xs, p); got != want {
			t.Errorf("Percentile(%v, %v) = %v, want %v", xs, p, got, want)
		}
	}
	f(nil, 50, 0)
	f(ms(7), 1, 7*time.Millisecond)
	f(ms(7), 100, 7*time.Millisecond)
	// Nearest rank: the smallest value with at least p% at or below it.
	f(ms(5, 1, 4, 2, 3), 50, 3*time.Millisecond)
	f(ms(5, 1, 4, 2, 3), 20, 1*time.Millisecond)
	f(ms(5, 1, 4, 2, 3), 21, 2*time.Millisecond)
	f(ms(5, 1, 4, 2, 3), 100, 5*time.Millisecond)
	f(ms(5, 1, 4, 2, 3), 0, 1*time.Millisecond)
	f(ms(5, 1, 4, 2, 3), 150, 5*time.Millisecond)
	xs := make([]time.Duration, 1000)
	for i := range xs {
		xs[i] = time.Duration(1000-i) * time.Millisecond
	}
	f(xs, 50, 500*time.Millisecond)
	f(xs, 99, 990*time.Millisecond)
	f(xs, 99.9, 999*time.Millisecond)
	// The input is left as it was.
	if xs[0] != 1000*time.Millisecond {
		t.Fatal("percentile sorted its input")
	}
}

func TestSummarize(t *testing.T) {
	s := Summarize([]time.Duration{3 * time.Second, time.Second, 2 * time.Second})
	if s.N != 3 || s.MinS != 1 || s.P50S != 2 || s.P99S != 3 || s.MaxS != 3 || s.Mean != 2 {
		t.Fatalf("Summarize = %+v", s)
	}
	if (Summarize(nil) != Summary{}) {
		t.Fatal("Summarize(nil) is not zero")
	}
}

func TestPromSum(t *testing.T) {
	page := []byte(`# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{engine="0",model_name="m"} 3.0
vllm:num_requests_running{engine="1",model_name="m"} 4.0
vllm:num_requests_running_x{engine="0"} 100.0
vllm:generation_tokens_total{engine="0",model_name="m"} 1.5e+03
vllm:generation_tokens_created{engine="0",model_name="m"} 1.7e+09
plain 7
`)
	f := func(name string, want float64, wantOK bool) {
		t.Helper()
		got, ok := PromSum(page, name)
		if got != want || ok != wantOK {
			t.Errorf("PromSum(%q) = %v, %v; want %v, %v", name, got, ok, want, wantOK)
		}
	}
	f("vllm:num_requests_running", 7, true)
	f("vllm:generation_tokens_total", 1500, true)
	f("vllm:generation_tokens", 0, false)
	f("plain", 7, true)
	f("missing", 0, false)
}
