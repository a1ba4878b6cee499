package kvevents

import (
	"fmt"
	"os"
	"runtime"
	"strings"
	"testing"
	"time"
)

// knownLeak is the one goroutine go-zeromq/zmq4 v0.17.0 never stops: each
// PUB socket's writer (pubMWriter.run) waits on a condition variable that
// only pubMWriter.Close signals, and socket.Close never calls it. The leak
// checks below tolerate exactly that frame.
const knownLeak = "zmq4.(*pubMWriter).run"

// stray returns the stacks of goroutines started by this package or by zmq4,
// other than the known zmq4 leak.
func stray() []string {
	buf := make([]byte, 1<<20)
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	var out []string
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, knownLeak) || strings.Contains(g, "kvevents.stray(") {
			continue
		}
		if strings.Contains(g, "created by testing.") {
			continue // a test itself
		}
		if strings.Contains(g, "go-zeromq/zmq4") || strings.Contains(g, "transport/kvevents.") {
			out = append(out, g)
		}
	}
	return out
}

// goroutines counts live goroutines other than the known zmq4 leak.
func goroutines() int {
	buf := make([]byte, 1<<20)
	n := runtime.Stack(buf, true)
	return runtime.NumGoroutine() - strings.Count(string(buf[:n]), knownLeak)
}

// checkNoStray waits up to d for every socket goroutine to end.
func checkNoStray(d time.Duration) []string {
	deadline := time.Now().Add(d)
	for {
		s := stray()
		if len(s) == 0 || time.Now().After(deadline) {
			return s
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestMain(m *testing.M) {
	code := m.Run()
	if code == 0 {
		if s := checkNoStray(5 * time.Second); len(s) > 0 {
			fmt.Fprintf(os.Stderr, "leaked goroutines:\n%s\n", strings.Join(s, "\n\n"))
			code = 1
		}
	}
	os.Exit(code)
}
