package load

import (
	"bytes"
	"fmt"
	"math"
	"strconv"
)

// Hist is one histogram family's totals on a page: its _sum and _count
// samples added over its series. A Hist is a plain value.
type Hist struct {
	Sum, Count float64
}

// Histogram reads the totals of the histogram name (without a suffix, such
// as vllm:time_to_first_token_seconds) from a whole page: its _sum and _count
// samples, each added over the family's series (vLLM's data-parallel ranks
// and any other labels). A series that repeats another's label set exactly
// counts once, the first one written, as in Parse. Buckets are not read.
//
// Report leaves histograms out; inferrail calibrate reads the engine's TTFT
// histogram on pages taken before and after one request, and the difference
// of the totals is that request's TTFT as the engine itself timed it.
//
// The error wraps ErrUnreadable when the page lacks the _sum or the _count,
// a sample of either is malformed, a sum is not finite, a count is not a
// finite non-negative number, or the totals overflow. Histogram keeps
// nothing of page.
func Histogram(page []byte, name string) (Hist, error) {
	var h Hist
	seenSum, seenCount := map[uint64]bool{}, map[uint64]bool{} // label-set identities
	for n := 1; len(page) > 0; n++ {
		l := page
		if i := bytes.IndexByte(page, '\n'); i >= 0 {
			l, page = page[:i], page[i+1:]
		} else {
			page = nil
		}
		if k := len(l); k > 0 && l[k-1] == '\r' {
			l = l[:k-1]
		}
		ln, i := lineName(l)
		if len(ln) != len(name)+len("_count") && len(ln) != len(name)+len("_sum") ||
			!bytes.HasPrefix(ln, []byte(name)) {
			continue
		}
		var isSum bool
		switch string(ln[len(name):]) {
		case "_sum":
			isSum = true
		case "_count":
		default:
			continue
		}
		s, ok := parseSample(l, i)
		if !ok {
			return Hist{}, fmt.Errorf("%w: line %d: %s: malformed sample", ErrUnreadable, n, ln)
		}
		v, err := strconv.ParseFloat(string(s.value), 64)
		if err != nil {
			return Hist{}, fmt.Errorf("%w: line %d: %s: bad value %.32q", ErrUnreadable, n, ln, s.value)
		}
		if math.IsNaN(v) || math.IsInf(v, 0) || !isSum && v < 0 {
			return Hist{}, fmt.Errorf("%w: line %d: %s: value %v out of range", ErrUnreadable, n, ln, v)
		}
		var series uint64
		it := labelIter{b: s.labels}
		for {
			k, lv, ok := it.next()
			if !ok {
				break
			}
			series += hashLabel(k, lv)
		}
		seen := seenCount
		if isSum {
			seen = seenSum
		}
		if seen[series] {
			continue
		}
		if len(seen) >= MaxSeries {
			return Hist{}, fmt.Errorf("%w: line %d: more than %d series", ErrUnreadable, n, MaxSeries)
		}
		seen[series] = true
		if isSum {
			h.Sum += v
		} else {
			h.Count += v
		}
	}
	switch {
	case len(seenCount) == 0:
		return Hist{}, fmt.Errorf("%w: missing %s_count", ErrUnreadable, name)
	case len(seenSum) == 0:
		return Hist{}, fmt.Errorf("%w: missing %s_sum", ErrUnreadable, name)
	case math.IsInf(h.Sum, 0) || math.IsInf(h.Count, 0):
		return Hist{}, fmt.Errorf("%w: %s: totals overflow", ErrUnreadable, name)
	}
	return h, nil
}
