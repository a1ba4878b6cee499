//go:build race

package scrape_test

// raceEnabled: the race detector checks every byte copied, and the hostile
// engines of the isolation tests copy gigabytes; with it, those tests read
// pages of at most hostileLimit bytes, the same way, sixteen times less.
const raceEnabled = true
