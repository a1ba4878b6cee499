package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/inferrail/inferrail/model/cost"
	"github.com/inferrail/inferrail/transport/calibrate"
)

// runCalibrate fits routing.cost_model's prefill parameters to an idle
// engine and prints them as a config fragment.
func runCalibrate(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	plan := cost.DefaultPlan()
	fs := flag.NewFlagSet("inferrail calibrate", flag.ContinueOnError)
	engineURL := fs.String("url", "", "the engine's base URL, such as http://127.0.0.1:8000 (required; it must be idle)")
	out := fs.String("out", "", "write the cost_model fragment to this file instead of stdout")
	seed := fs.Uint64("seed", 0, "seed of the prompts' random words (0 draws one); a seed already run against the engine finds its prompts cached")
	model := fs.String("model", "", "model name to send (default: the first one GET /v1/models lists)")
	fs.Var((*intList)(&plan.Cached), "cached", "cached prefix sizes c, in tokens, comma-separated")
	fs.Var((*intList)(&plan.Compute), "compute", "computed sizes u, in tokens, comma-separated")
	fs.IntVar(&plan.Repeats, "repeat", plan.Repeats, "times each (c, u) pair is sent")
	timeout := fs.Duration("timeout", calibrate.DefaultRequestTimeout, "bound on each request")
	if err := parseFlags(fs, args, stderr, "inferrail calibrate --url ENGINE [--out FILE] [--seed N] [--model NAME] [flags]"); err != nil {
		return err
	}
	if *engineURL == "" {
		fmt.Fprintln(stderr, "--url is required")
		return errUsage
	}
	if err := plan.Validate(); err != nil {
		fmt.Fprintf(stderr, "--cached, --compute, --repeat: %v\n", err)
		return errUsage
	}
	if *seed == 0 {
		*seed = rand.Uint64()
	}

	probes := plan.Probes()
	res, err := calibrate.Run(ctx, calibrate.Options{
		URL:            *engineURL,
		Model:          *model,
		Seed:           *seed,
		Probes:         probes,
		RequestTimeout: *timeout,
		Progress: func(i int, m calibrate.Measurement) {
			fmt.Fprintf(stderr, "probe %*d/%d  c=%-5d u=%-5d  cached %-5d computed %-5d  TTFT %-10v HTTP %v\n",
				len(strconv.Itoa(len(probes))), i+1, len(probes), m.Probe.Cached, m.Probe.Compute,
				m.Cached, m.Computed(), m.TTFT.Round(time.Microsecond), m.HTTP.Round(time.Microsecond))
		},
	})
	if err != nil {
		return fmt.Errorf("%s: %w", *engineURL, err)
	}
	samples := res.Samples()
	fit, err := cost.Fit(samples)
	if err != nil {
		return fmt.Errorf("%s: %w", *engineURL, err)
	}
	var overhead time.Duration
	cached := 0
	for _, m := range res.Probes {
		overhead += m.HTTP - m.TTFT
		cached += m.Cached
	}
	overhead /= time.Duration(len(res.Probes))
	comments := []string{
		fmt.Sprintf("inferrail calibrate --url %s --seed %d --cached %v --compute %v --repeat %d",
			*engineURL, *seed, (*intList)(&plan.Cached), (*intList)(&plan.Compute), plan.Repeats),
		fmt.Sprintf("model %s, %s: %d probes; the fit's RMS error is %.2g%% of TTFT; HTTP added %v per probe.",
			res.Model, time.Now().UTC().Format(time.RFC3339), len(probes), 100*cost.RelError(fit, samples),
			overhead.Round(time.Microsecond)),
		"Paste under routing: (or under a model's entry) in the gateway's config.",
	}
	if cached == 0 {
		comments = append(comments, "The engine cached nothing: is prefix caching off? b then rests on u alone.")
	}
	frag := cost.Fragment(fit, comments...)
	if *out == "" {
		_, err = stdout.Write(frag)
		return err
	}
	if err := os.WriteFile(*out, frag, 0o644); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "inferrail calibrate: wrote %s\n", *out)
	return nil
}

// intList is a comma-separated list of integers flag.
type intList []int

func (l *intList) String() string {
	if l == nil {
		return ""
	}
	s := make([]string, len(*l))
	for i, v := range *l {
		s[i] = strconv.Itoa(v)
	}
	return strings.Join(s, ",")
}

func (l *intList) Set(v string) error {
	var out []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return fmt.Errorf("want comma-separated integers, got %q", v)
		}
		out = append(out, n)
	}
	*l = out
	return nil
}
