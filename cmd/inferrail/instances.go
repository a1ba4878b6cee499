package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/inferrail/inferrail/bench/agree"
	"github.com/inferrail/inferrail/sim"
	"github.com/inferrail/inferrail/sim/cluster"
)

// benchInstances runs bench/agree's matrix: 1, 2 and 4 gateway instances
// in front of the same engines, in virtual time.
func benchInstances(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("inferrail bench instances", flag.ContinueOnError)
	policies := fs.String("policies", "cost_model,kv_aware", "comma-separated policies")
	rendezvous := fs.String("cold-rendezvous", "cost_model", "comma-separated policies also run with routing.cold_rendezvous")
	counts := fs.String("instances", "1,2,4", "comma-separated instance counts; the first is the control")
	balance := fs.String("balance", "round-robin", "how the load balancer spreads requests: round-robin or random")
	replicas := fs.Int("replicas", 3, "engines")
	duration := fs.Duration("duration", 180*time.Second, "virtual time of arrivals per run")
	warmUp := fs.Duration("warmup", 30*time.Second, "arrivals before this are left out")
	seeds := fs.Int("seeds", 3, "seeds per cell (1, 2, …)")
	jobs := fs.Int("jobs", 2, "runs at once")
	out := fs.String("out", "", "Markdown file to write (default: stdout)")
	faults := fs.Bool("faults", false, "run the fault runs instead: two instances with KV events, one killed, then events withheld 5 s")
	kill := fs.Bool("kill", false, "run the real-time kill run instead: two gateway processes, one killed with SIGKILL under load, with KV events and without")
	killRate := fs.Float64("kill-rate", 1000, "the kill run's requests per second over both instances")
	killFor := fs.Duration("kill-duration", 12*time.Second, "the kill run's arrivals")
	killAt := fs.Duration("kill-at", 6*time.Second, "when the kill run kills instance 1")
	if err := parseFlags(fs, args, stderr, "inferrail bench instances [flags]"); err != nil {
		return err
	}
	if *kill {
		return benchKill(ctx, agree.KillOptions{Rate: *killRate, Duration: *killFor, KillAt: *killAt, Log: stderr}, *out, stdout)
	}
	bal, err := cluster.ParseBalance(*balance)
	if err != nil {
		return err
	}
	o := agree.Options{Variants: agree.Variants(strings.Split(*policies, ","), strings.Split(*rendezvous, ",")), Replicas: *replicas, Engine: sim.DefaultOptions().Engine,
		Balance: bal, Duration: *duration, WarmUp: *warmUp, Jobs: *jobs}
	for _, s := range strings.Split(*counts, ",") {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 {
			return fmt.Errorf("--instances: %q: want counts of at least 1", s)
		}
		o.Instances = append(o.Instances, n)
	}
	for k := range max(*seeds, 1) {
		o.Seeds = append(o.Seeds, uint64(k+1))
	}
	if o.Points, err = agree.Points(); err != nil {
		return err
	}
	w, closeOut, err := output(*out, stdout)
	if err != nil {
		return err
	}
	defer closeOut()
	if *faults {
		rows, err := agree.Faults(o)
		if err != nil {
			return err
		}
		return agree.WriteFaults(w, rows)
	}
	rows, err := agree.Run(o)
	if err != nil {
		return err
	}
	return agree.Write(w, rows)
}

// benchKill runs the kill run with KV events and without, with this binary
// as the gateways, and writes both rows to out (stdout when empty). It fails
// when either run breaks its promise (agree.KillResult.Check).
func benchKill(ctx context.Context, o agree.KillOptions, out string, stdout io.Writer) error {
	bin, err := os.Executable()
	if err != nil {
		return err
	}
	o.Bin = bin
	w, closeOut, err := output(out, stdout)
	if err != nil {
		return err
	}
	defer closeOut()
	var errs []error
	for _, events := range []bool{true, false} {
		o.Events = events
		r, err := agree.Kill(ctx, o)
		if err != nil {
			return err
		}
		if err := agree.WriteKill(w, o, r); err != nil {
			return err
		}
		fmt.Fprintln(w)
		if err := r.Check(); err != nil {
			errs = append(errs, fmt.Errorf("KV events %v: %w", events, err))
		}
	}
	return errors.Join(errs...)
}
