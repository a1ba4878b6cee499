//go:build race

package frontend

// raceEnabled: the race detector slows everything several times over, so
// timing bounds are not asserted under it.
const raceEnabled = true
