//go:build race

package sockio

// raceEnabled: see Wrap.
const raceEnabled = true
