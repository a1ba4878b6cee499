package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/inferrail/inferrail/bench/stress"
	"github.com/inferrail/inferrail/config"
)

func runStress(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("inferrail stress", flag.ContinueOnError)
	short := fs.Bool("short", false, "the CI version: every scenario, with smaller counts")
	match := fs.String("run", "", "run only the scenarios whose name matches this regexp (see --list)")
	list := fs.Bool("list", false, "list the scenarios and exit")
	out := fs.String("out", "", "also write the results as Markdown to this file")
	cpuProfile := fs.String("cpuprofile", "", "write a CPU profile of the whole run to this file")
	blockProfile := fs.String("blockprofile", "", "write a blocking profile of the whole run to this file")
	if err := parseFlags(fs, args, stderr, "inferrail stress [--short] [--run REGEXP] [--out FILE]"); err != nil {
		return err
	}
	if *list {
		for _, s := range stress.Scenarios() {
			fmt.Fprintf(stdout, "%-11s %s\n", s[0], s[1])
		}
		return nil
	}
	opts := stress.Options{Short: *short, Launch: launchGateway, Progress: stderr}
	if *match != "" {
		re, err := regexp.Compile(*match)
		if err != nil {
			fmt.Fprintf(stderr, "--run: %v\n", err)
			return errUsage
		}
		opts.Match = re
	}
	bin, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this binary for the simulator processes: %w", err)
	}
	opts.SimBin = bin

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if *blockProfile != "" {
		runtime.SetBlockProfileRate(int(time.Millisecond))
		defer func() {
			f, err := os.Create(*blockProfile)
			if err != nil {
				fmt.Fprintf(stderr, "--blockprofile: %v\n", err)
				return
			}
			defer f.Close()
			pprof.Lookup("block").WriteTo(f, 0)
		}()
	}

	started := time.Now()
	results, runErr := stress.Run(ctx, opts)
	took := time.Since(started)
	if len(results) == 0 && runErr != nil {
		return runErr
	}

	var table bytes.Buffer
	stress.WriteTable(&table, results)
	failed := 0
	for _, r := range results {
		if !r.Passed() {
			failed++
		}
	}
	summary := fmt.Sprintf("%d of %d scenarios passed in %s; %s", len(results)-failed, len(results),
		took.Round(time.Second), stress.LeakSummary(results))
	fmt.Fprintf(stdout, "\n%s\n%s\n", table.String(), summary)
	if *out != "" {
		if err := os.WriteFile(*out, []byte(markdown(args, *short, took, table.String(), summary)), 0o644); err != nil {
			return err
		}
	}
	switch {
	case runErr != nil:
		return runErr
	case failed > 0:
		return fmt.Errorf("%d of %d scenarios failed", failed, len(results))
	}
	return nil
}

// markdown is the results file: how it was run, then the table.
func markdown(args []string, short bool, took time.Duration, table, summary string) string {
	var b strings.Builder
	kind := "full"
	if short {
		kind = "short"
	}
	host, _ := os.Hostname()
	fmt.Fprintf(&b, "# Stress and fault suite (%s), %s\n\n", kind, time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(&b, "- Command: `inferrail stress %s`\n", strings.Join(args, " "))
	fmt.Fprintf(&b, "- Version: inferrail %s, %s, GOMAXPROCS %d, %d CPUs, host %s\n", version, runtime.Version(),
		runtime.GOMAXPROCS(0), runtime.NumCPU(), host)
	fmt.Fprintf(&b, "- Date: %s; the suite took %s\n", time.Now().UTC().Format(time.RFC3339), took.Round(time.Second))
	fmt.Fprintf(&b, "- Client, gateway and simulators share the machine; the gateway runs in the suite's process, as `inferrail serve` runs it\n\n")
	b.WriteString(table)
	fmt.Fprintf(&b, "\n%s\n", summary)
	return b.String()
}

// launchGateway runs serve from a config file holding cfg, as `inferrail
// serve --config` does (so that the admin API can reload and patch it),
// until the returned gateway is stopped.
func launchGateway(ctx context.Context, cfg *config.Config, log io.Writer) (*stress.Gateway, error) {
	b, err := cfg.YAML()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "inferrail-stress-")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "inferrail.yaml")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	type addrs struct{ client, admin string }
	ready := make(chan addrs, 1)
	done := make(chan error, 1)
	go func() {
		defer os.RemoveAll(dir)
		done <- serveFile(ctx, path, cfg, io.Discard, log, func(a, b string) { ready <- addrs{a, b} })
	}()
	select {
	case a := <-ready:
		return stress.NewGateway(a.client, a.admin, func() error {
			cancel()
			return <-done
		}), nil
	case err := <-done:
		cancel()
		if err == nil {
			err = errors.New("serve returned before it listened")
		}
		return nil, err
	}
}
