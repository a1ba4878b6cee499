package whatif

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"
)

// Fidelity compares a replay of a request log with what the log measured:
// the logged policy at the logged replica count, on the chosen engine.
type Fidelity struct {
	Policy   string `json:"policy"`
	Replicas int    `json:"replicas"`
	Logged   Stats  `json:"logged"`
	Replayed Result `json:"replayed"`
}

// Stats is what a request log measured, latencies in seconds.
type Stats struct {
	// Requests counts the log's requests, Measured those with a TTFT.
	Requests int     `json:"requests"`
	Measured int     `json:"measured"`
	P50TTFT  float64 `json:"p50_ttft_s"`
	P99TTFT  float64 `json:"p99_ttft_s"`
	// HitRate is cached_tokens over input_length, over the requests whose
	// engine reported cached_tokens.
	HitRate float64 `json:"hit_rate"`
}

// LoggedFleet reads a request log's fleet: the policy that routed most of
// its requests, the number of distinct replicas that served them, and what
// it measured.
func LoggedFleet(obs []Logged) (policy string, replicas int, s Stats, err error) {
	policies := map[string]int{}
	reps := map[string]bool{}
	var ttft []time.Duration
	var input, cached int64
	for _, o := range obs {
		s.Requests++
		if o.Policy != "" {
			policies[o.Policy]++
		}
		if o.Replica != "" {
			reps[o.Replica] = true
		}
		if o.Measured {
			ttft = append(ttft, o.TTFT)
		}
		if o.HasCached {
			input += int64(o.Input)
			cached += int64(o.Cached)
		}
	}
	for p, n := range policies {
		if n > policies[policy] || n == policies[policy] && p < policy {
			policy = p
		}
	}
	var errs []error
	if policy == "" {
		errs = append(errs, errors.New("no request names its policy"))
	}
	if len(reps) == 0 {
		errs = append(errs, errors.New("no request names its replica"))
	}
	if len(ttft) == 0 {
		errs = append(errs, errors.New("no request has a measured TTFT"))
	}
	if err := errors.Join(errs...); err != nil {
		return "", 0, s, fmt.Errorf("request log: %w", err)
	}
	s.Measured = len(ttft)
	s.P50TTFT, s.P99TTFT = quantile(ttft, 50), quantile(ttft, 99)
	if input > 0 {
		s.HitRate = float64(cached) / float64(input)
	}
	return policy, len(reps), s, nil
}

// CheckFidelity replays p's traffic at scale 1 with the logged policy on the
// logged replica count (LoggedFleet) and returns the comparison. The point
// is resumed from o.Dir like any other.
func CheckFidelity(ctx context.Context, p Plan, obs []Logged, o Options) (*Fidelity, error) {
	policy, replicas, s, err := LoggedFleet(obs)
	if err != nil {
		return nil, err
	}
	routes, err := ParseRoutes([]string{policy}, func(string) ([]byte, error) {
		return nil, errors.New("a profile's document is not in the log")
	})
	if err != nil {
		return nil, fmt.Errorf("fidelity: the logged policy: %w", err)
	}
	p.Routes, p.Replicas, p.Scales = routes, []int{replicas}, []float64{1}
	if err := p.Validate(); err != nil {
		return nil, fmt.Errorf("whatif: %w", err)
	}
	rn := newRunner(&p, o, 1)
	defer rn.bar.End()
	res, err := rn.point(ctx, &routes[0], replicas, 1)
	if err != nil {
		return nil, err
	}
	return &Fidelity{Policy: policy, Replicas: replicas, Logged: s, Replayed: *res}, nil
}

func (fd *Fidelity) markdown(w io.Writer) {
	p := func(format string, a ...any) { fmt.Fprintf(w, format, a...) }
	p("## Fidelity: the replay against the log\n\n")
	p("The log's own fleet replayed: `%s` on %d replicas (its distinct replica ids), with this engine model, at the log's rate. %d of the log's %d requests have a measured TTFT.\n\n",
		fd.Policy, fd.Replicas, fd.Logged.Measured, fd.Logged.Requests)
	p("| | p50 TTFT ms | p99 TTFT ms | hit rate |\n|---|---|---|---|\n")
	p("| logged | %s | %s | %.3f |\n", ms(fd.Logged.P50TTFT), ms(fd.Logged.P99TTFT), fd.Logged.HitRate)
	p("| replayed | %s | %s | %.3f |\n\n", ms(fd.Replayed.P50TTFT), ms(fd.Replayed.P99TTFT), fd.Replayed.HitRate)
	p("Logged TTFTs include the network and the gateway, which the replay does not model; a replayed hit rate far from the logged one means the engine model's KV capacity differs from the real engines'.\n\n")
}
