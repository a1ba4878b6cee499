package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/inferrail/inferrail/sim"
)

func runSim(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	opts := sim.DefaultOptions()
	fs := flag.NewFlagSet("inferrail sim", flag.ContinueOnError)
	opts.RegisterFlags(fs)
	opts.RegisterServerFlags(fs)
	if err := parseFlags(fs, args, stderr, "inferrail sim [flags]"); err != nil {
		return err
	}
	s, err := sim.Start(opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "inferrail sim: serving %v on %s\n", opts.Names(), s.URL())
	<-ctx.Done()
	return s.Close()
}
