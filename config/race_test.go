//go:build race

package config

// raceEnabled slows time bounds: the race detector makes koanf's reflective
// copy and decode of a large document about twenty times slower.
const raceEnabled = true
