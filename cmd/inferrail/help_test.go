package main

import (
	"bytes"
	"strings"
	"testing"
)

// TestHelpDefaultsOnce walks every subcommand's --help (bench's own
// subcommands too) and fails when a flag's entry shows "(default" more than
// once: the flag package appends the default itself whenever it is not the
// zero value, so a usage string that also states it prints it twice
// (issue 32, case 5: `inferrail sim --help` printed "(default 100) (default 100)").
func TestHelpDefaultsOnce(t *testing.T) {
	var argsets [][]string
	for _, c := range commands() {
		switch c.name {
		case "version":
		case "bench":
			for name := range benchCommands() {
				argsets = append(argsets, []string{"bench", name, "--help"})
			}
		default:
			argsets = append(argsets, []string{c.name, "--help"})
		}
	}
	walked := 0
	for _, args := range argsets {
		var out, errOut bytes.Buffer
		if code := run(args, &out, &errOut); code != 0 {
			t.Errorf("%s: exit %d: %s", strings.Join(args, " "), code, errOut.String())
			continue
		}
		entries := flagEntries(out.String() + errOut.String())
		walked += len(entries)
		for _, entry := range entries {
			if n := strings.Count(entry, "(default"); n > 1 {
				t.Errorf("%s: a flag shows its default %d times:\n%s", strings.Join(args, " "), n, entry)
			}
		}
	}
	if walked < 100 {
		t.Fatalf("walked %d flags in %d help texts; the help format changed", walked, len(argsets))
	}
}

// flagEntries splits flag.PrintDefaults output into one string per flag:
// the "  -name type" line and its indented usage lines.
func flagEntries(help string) []string {
	var entries []string
	for _, line := range strings.Split(help, "\n") {
		switch {
		case strings.HasPrefix(line, "  -"):
			entries = append(entries, line)
		case strings.HasPrefix(line, "    \t") && len(entries) > 0:
			entries[len(entries)-1] += "\n" + line
		}
	}
	return entries
}
