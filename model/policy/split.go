package policy

import (
	"cmp"
	"fmt"
	"math/bits"
	"slices"
)

// Arm is one policy of an A/B split and its percent of the model's traffic.
type Arm struct {
	Policy  string
	Percent int
}

// Split divides a model's traffic between policies by request key: each
// arm gets its percent of the keys, and a key always falls in the same arm,
// in every gateway and across restarts. Immutable.
type Split struct {
	arms []Arm // sorted by policy name
}

// NewSplit returns the split of percents, whole percents by policy name
// summing to 100 (config's routing.split or a model's split). Arms with 0
// percent are kept: they get no traffic but can still be explained.
func NewSplit(percents map[string]int) (Split, error) {
	var s Split
	sum := 0
	for name, pct := range percents {
		if pct < 0 || pct > 100 {
			return Split{}, fmt.Errorf("policy: split: %s: percent %d is not from 0 to 100", name, pct)
		}
		sum += pct
		s.arms = append(s.arms, Arm{Policy: name, Percent: pct})
	}
	if sum != 100 {
		return Split{}, fmt.Errorf("policy: split: percents sum to %d, want 100", sum)
	}
	slices.SortFunc(s.arms, func(a, b Arm) int { return cmp.Compare(a.Policy, b.Policy) })
	return s, nil
}

// Arms returns the arms sorted by policy name. The caller must not modify
// the slice.
func (s Split) Arms() []Arm { return s.arms }

// Arm returns the position in Arms of the arm a request with key (Request.Key:
// its conversation key, else its request id's) falls in. A split of one arm
// always returns 0.
func (s Split) Arm(key uint64) int {
	if len(s.arms) <= 1 {
		return 0
	}
	point := SplitPoint(key)
	for i, a := range s.arms {
		if point < a.Percent {
			return i
		}
		point -= a.Percent
	}
	return len(s.arms) - 1 // unreachable: the percents sum to 100
}

// SplitPoint maps key to a percentile in [0, 100), uniformly over keys. It
// remixes the key (a salted SplitMix64 finalizer) so that the split is
// independent of anything else that hashes the key: a conversation's arm
// says nothing of its replica.
func SplitPoint(key uint64) int {
	x := key ^ 0x5a17_ab5e_c0de_d00d // salt: "split"
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	hi, _ := bits.Mul64(x, 100)
	return int(hi)
}
