package vllmmetrics

import (
	"math"
	"testing"
)

// Expected strings are what CPython 3.11 printed for repr(v) and
// prometheus_client.utils.floatToGoString(v).
func TestAppendSample(t *testing.T) {
	f := func(v float64, repr, sample string) {
		t.Helper()
		if !math.IsInf(v, 0) && !math.IsNaN(v) {
			if got := string(appendPyRepr(nil, v)); got != repr {
				t.Errorf("repr(%v) = %q, want %q", v, got, repr)
			}
		}
		if got := string(appendSample([]byte("x "), v)); got != "x "+sample {
			t.Errorf("floatToGoString(%v) = %q, want %q", v, got[2:], sample)
		}
	}
	f(0.0, "0.0", "0.0")
	f(math.Copysign(0, -1), "-0.0", "-0.0")
	f(1.0, "1.0", "1.0")
	f(0.25, "0.25", "0.25")
	f(2.5e-05, "2.5e-05", "2.5e-05")
	f(1e-4, "0.0001", "0.0001")
	f(1e-5, "1e-05", "1e-05")
	f(1e-7, "1e-07", "1e-07")
	f(123.456, "123.456", "123.456")
	tenth, fifth := 0.1, 0.2 // variables: Go constant arithmetic is exact
	f(tenth+fifth, "0.30000000000000004", "0.30000000000000004")
	f(999999.0, "999999.0", "999999.0")
	f(1e6, "1000000.0", "1e+06")
	f(1234567.0, "1234567.0", "1.234567e+06")
	f(2.5e6, "2500000.0", "2.5e+06")
	f(1e10, "10000000000.0", "1e+010")
	f(1.5e10, "15000000000.0", "1.5e+010")
	f(1e15, "1000000000000000.0", "1e+015")
	f(1e16, "1e+16", "1e+16")
	f(1.5e16, "1.5e+16", "1.5e+16")
	f(1e20, "1e+20", "1e+20")
	f(123456789012345678.0, "1.2345678901234568e+17", "1.2345678901234568e+17")
	f(1e100, "1e+100", "1e+100")
	f(float64(1700000000123456000)/1e9, "1700000000.123456", "1.700000000123456e+09")
	f(-1234567.0, "-1234567.0", "-1234567.0") // only positive numbers are rewritten
	f(5e-324, "5e-324", "5e-324")
	f(math.MaxFloat64, "1.7976931348623157e+308", "1.7976931348623157e+308")
	f(9000.002, "9000.002", "9000.002")
	f(100000.0, "100000.0", "100000.0")
	f(math.Inf(1), "", "+Inf")
	f(math.Inf(-1), "", "-Inf")
	f(math.NaN(), "", "NaN")
}

func TestHistogramNaN(t *testing.T) {
	var h hist
	bounds := []float64{1, math.Inf(1)}
	h.observe(bounds, math.NaN())
	h.observe(bounds, 1)
	h.observe(bounds, 1.5)
	if h.counts[0] != 1 || h.counts[1] != 1 || !math.IsNaN(h.sum) {
		t.Errorf("counts %v sum %v: prometheus_client puts NaN in no bucket and in the sum", h.counts[:2], h.sum)
	}
}

func BenchmarkAppendSample(b *testing.B) {
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		buf = appendSample(buf[:0], 1.700000000123456e9)
	}
}
