//go:build race

package cluster

// raceEnabled reports a -race build. A run is one goroutine, so the race
// detector has nothing to find in it and slows it about 25 times: the
// long routing criteria skip themselves under it.
const raceEnabled = true
