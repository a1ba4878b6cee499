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

// benchInstances runs bench/agree's matrix: 1, 2 and 3 gateway instances
// in front of the same engines, in virtual time (or, with --real, gateway
// processes in real time).
func benchInstances(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("inferrail bench instances", flag.ContinueOnError)
	policies := fs.String("policies", "cost_model,kv_aware", "comma-separated policies")
	rendezvous := fs.String("cold-rendezvous", "cost_model", "comma-separated policies also run with routing.cold_rendezvous")
	counts := fs.String("instances", "1,2,3", "comma-separated instance counts; the first is the control")
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
	realRun := fs.Bool("real", false, "run the real-time matrix instead: --instances gateway processes on three simulators, W1, W2, W3 and hot, with KV events and without")
	realRequests := fs.Int("real-requests", 240, "the real-time matrix's requests per cell (the first quarter left out)")
	realRate := fs.Float64("real-rate", 40, "the real-time matrix's requests per second")
	realRendezvous := fs.Bool("real-rendezvous", false, "the real-time matrix also runs every cell with routing.cold_rendezvous")
	if err := parseFlags(fs, args, stderr, "inferrail bench instances [flags]"); err != nil {
		return err
	}
	if *kill {
		return benchKill(ctx, agree.KillOptions{Rate: *killRate, Duration: *killFor, KillAt: *killAt, Log: stderr}, *out, stdout)
	}
	instances, err := parseCounts(*counts)
	if err != nil {
		return err
	}
	if *realRun {
		bin, err := os.Executable()
		if err != nil {
			return err
		}
		rows, err := agree.Real(ctx, agree.RealOptions{Bin: bin, Points: []string{"W1", "W2", "W3", "hot"}, Instances: instances,
			Requests: *realRequests, WarmUp: *realRequests / 4, Rate: *realRate, MaxTokens: 16, Seed: 1, Rendezvous: *realRendezvous, Log: stderr})
		if err != nil {
			return err
		}
		return writeOut(*out, stdout, func(w io.Writer) error { return agree.WriteReal(w, rows) })
	}
	bal, err := cluster.ParseBalance(*balance)
	if err != nil {
		return err
	}
	o := agree.Options{Variants: agree.Variants(strings.Split(*policies, ","), strings.Split(*rendezvous, ",")), Replicas: *replicas, Engine: sim.DefaultOptions().Engine,
		Balance: bal, Duration: *duration, WarmUp: *warmUp, Jobs: *jobs, Instances: instances}
	for k := range max(*seeds, 1) {
		o.Seeds = append(o.Seeds, uint64(k+1))
	}
	if o.Points, err = agree.Points(); err != nil {
		return err
	}
	if *faults {
		rows, err := agree.Faults(o)
		if err != nil {
			return err
		}
		return writeOut(*out, stdout, func(w io.Writer) error { return agree.WriteFaults(w, rows) })
	}
	rows, err := agree.Run(o)
	if err != nil {
		return err
	}
	return writeOut(*out, stdout, func(w io.Writer) error { return agree.Write(w, rows) })
}

// parseCounts reads --instances: comma-separated counts of at least 1.
func parseCounts(s string) ([]int, error) {
	var out []int
	for _, c := range strings.Split(s, ",") {
		n, err := strconv.Atoi(c)
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--instances: %q: want counts of at least 1", c)
		}
		out = append(out, n)
	}
	return out, nil
}

// writeOut runs write on the file out, created, or on stdout when out is
// empty.
func writeOut(out string, stdout io.Writer, write func(io.Writer) error) error {
	w, closeOut, err := output(out, stdout)
	if err != nil {
		return err
	}
	if err := write(w); err != nil {
		closeOut()
		return err
	}
	return closeOut()
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
