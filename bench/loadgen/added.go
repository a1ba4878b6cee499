package loadgen

import (
	"fmt"
	"slices"
	"time"
)

// Added is the latency a proxy adds at one percentile: the percentile
// measured through the proxy less the same percentile measured straight to
// the engines in the same round. Percentiles do not subtract request by
// request, so this is a difference of distributions, as the issue defines
// it; it can come out negative when the proxy costs less than the noise.
func Added(via, direct time.Duration) time.Duration { return via - direct }

// AddedPerRound is Added for each round: via[r] − direct[r].
func AddedPerRound(via, direct []time.Duration) ([]time.Duration, error) {
	if len(via) != len(direct) {
		return nil, fmt.Errorf("%d rounds through the proxy, %d direct", len(via), len(direct))
	}
	out := make([]time.Duration, len(via))
	for i := range via {
		out[i] = Added(via[i], direct[i])
	}
	return out, nil
}

// Median is the middle of xs (the mean of the two middle values for an
// even count), and 0 for none. It sorts a copy.
func Median(xs []time.Duration) time.Duration {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return s[n/2-1] + (s[n/2]-s[n/2-1])/2
}

// Ratio is a/b, and false when b is not positive: a ratio to an added
// latency that the noise made zero or negative says nothing.
func Ratio(a, b time.Duration) (float64, bool) {
	if b <= 0 {
		return 0, false
	}
	return float64(a) / float64(b), true
}
