package stress

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/pprof"
	"sort"
	"strings"
	"time"
)

// Usage is what the leak check counts in this process at one moment.
type Usage struct {
	Goroutines int
	FDs        int // entries of /proc/self/fd
}

func currentUsage() (Usage, error) {
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return Usage{}, fmt.Errorf("open files: %w", err)
	}
	return Usage{Goroutines: runtime.NumGoroutine(), FDs: len(fds)}, nil
}

// leakBounds is how far above the baseline counts may stay, and how long
// they get to come back: connections close and goroutines return a little
// after a server's Shutdown does (fasthttp's idle-connection cleaners sleep
// up to their idle timeout before they exit).
type leakBounds struct {
	Goroutines int
	FDs        int
	// Settle is how long the counts get to come back within bounds.
	Settle time.Duration
	// Quiet is how long counts above the baseline (but within bounds)
	// are given to come down to it before the check passes, so that the
	// next scenario's baseline is not inflated by this one's stragglers.
	Quiet time.Duration
}

var defaultLeakBounds = leakBounds{Goroutines: 2, FDs: 2, Settle: 10 * time.Second, Quiet: 1500 * time.Millisecond}

// LeakCheck is the comparison of a scenario's end with its start.
type LeakCheck struct {
	Before, After Usage
	Waited        time.Duration // until the counts were back within bounds, or the settle time
	Leaked        bool
	// Dump describes what stayed: the goroutines by stack, and the open
	// files by kind. Empty when nothing leaked.
	Dump string
}

func (l LeakCheck) String() string {
	return fmt.Sprintf("goroutines %d→%d, fds %d→%d", l.Before.Goroutines, l.After.Goroutines, l.Before.FDs, l.After.FDs)
}

// checkLeaks waits up to b.Settle for the goroutine and file descriptor
// counts to come back within b of before, polling every 50 ms. Counts at or
// under before pass at once; counts above it but within b pass once b.Quiet
// has gone by.
func checkLeaks(ctx context.Context, before Usage, b leakBounds) LeakCheck {
	start := time.Now()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		u, err := currentUsage()
		if err != nil {
			return LeakCheck{Before: before, Leaked: true, Dump: err.Error()}
		}
		lc := LeakCheck{Before: before, After: u, Waited: time.Since(start)}
		if u.Goroutines <= before.Goroutines && u.FDs <= before.FDs {
			return lc
		}
		if u.Goroutines <= before.Goroutines+b.Goroutines && u.FDs <= before.FDs+b.FDs && lc.Waited >= b.Quiet {
			return lc
		}
		if lc.Waited >= b.Settle || ctx.Err() != nil {
			lc.Leaked = true
			lc.Dump = leakDump(u, before)
			return lc
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
		}
	}
}

// leakDump describes the goroutines (grouped by stack, the first 16 groups)
// and the open files (by kind) of this process.
func leakDump(now, before Usage) string {
	var b strings.Builder
	if now.Goroutines != before.Goroutines {
		var prof bytes.Buffer
		pprof.Lookup("goroutine").WriteTo(&prof, 1)
		groups := strings.Split(prof.String(), "\n\n")
		if len(groups) > 16 {
			groups = groups[:16]
		}
		fmt.Fprintf(&b, "goroutines, most common stacks first:\n%s\n", strings.Join(groups, "\n\n"))
	}
	if now.FDs != before.FDs {
		fmt.Fprintf(&b, "open files by kind: %s\n", fdKinds())
	}
	return b.String()
}

// fdKinds counts this process's open files by what they point at: socket,
// pipe, anon_inode:[eventpoll], or a path.
func fdKinds() string {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return err.Error()
	}
	kinds := map[string]int{}
	for _, e := range ents {
		target, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err != nil {
			continue // closed while we looked
		}
		if i := strings.IndexByte(target, ':'); i > 0 && !strings.HasPrefix(target, "/") {
			target = target[:i]
		}
		kinds[target]++
	}
	keys := make([]string, 0, len(kinds))
	for k := range kinds {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return kinds[keys[i]] > kinds[keys[j]] })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s %d", k, kinds[k])
	}
	return strings.Join(parts, ", ")
}
