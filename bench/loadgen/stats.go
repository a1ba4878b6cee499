package loadgen

import (
	"bufio"
	"bytes"
	"math"
	"slices"
	"strconv"
	"time"
)

// Percentile returns the nearest-rank p-th percentile (0 < p ≤ 100) of xs:
// the smallest value with at least p% of the values at or below it. It sorts
// a copy and returns 0 for no values.
func Percentile(xs []time.Duration, p float64) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	return NearestRank(s, p)
}

// NearestRank is Percentile on an already sorted, non-empty slice.
func NearestRank(sorted []time.Duration, p float64) time.Duration {
	// The epsilon keeps p = 99.9 of 1,000 values at rank 999, not 1,000,
	// where 99.9/100·1000 comes out a hair above 999.
	rank := int(math.Ceil(p/100*float64(len(sorted)) - 1e-9))
	rank = min(max(rank, 1), len(sorted))
	return sorted[rank-1]
}

// Summary is the distribution of one set of durations.
type Summary struct {
	N    int     `json:"n"`
	MinS float64 `json:"min_s"`
	P50S float64 `json:"p50_s"`
	P90S float64 `json:"p90_s"`
	P99S float64 `json:"p99_s"`
	MaxS float64 `json:"max_s"`
	Mean float64 `json:"mean_s"`
}

// Summarize describes xs; the zero Summary when xs is empty.
func Summarize(xs []time.Duration) Summary {
	if len(xs) == 0 {
		return Summary{}
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	var sum time.Duration
	for _, x := range s {
		sum += x
	}
	return Summary{
		N:    len(s),
		MinS: s[0].Seconds(),
		P50S: NearestRank(s, 50).Seconds(),
		P90S: NearestRank(s, 90).Seconds(),
		P99S: NearestRank(s, 99).Seconds(),
		MaxS: s[len(s)-1].Seconds(),
		Mean: (sum / time.Duration(len(s))).Seconds(),
	}
}

// PromSum returns the sum over every series of the metric called name in a
// Prometheus text exposition page, and whether any was found. Only the
// exact name matches: "vllm:x" does not match "vllm:x_total".
func PromSum(page []byte, name string) (float64, bool) {
	var sum float64
	found := false
	sc := bufio.NewScanner(bytes.NewReader(page))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		if len(line) <= len(name) || !bytes.HasPrefix(line, []byte(name)) {
			continue
		}
		rest := line[len(name):]
		switch rest[0] {
		case '{':
			// Label values may hold '}' only escaped inside quotes; vLLM's never do.
			i := bytes.LastIndexByte(rest, '}')
			if i < 0 {
				continue
			}
			rest = rest[i+1:]
		case ' ':
		default:
			continue
		}
		fields := bytes.Fields(rest)
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(string(fields[0]), 64)
		if err != nil {
			continue
		}
		sum += v
		found = true
	}
	return sum, found
}
