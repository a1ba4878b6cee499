//go:build !race

package scrape_test

const raceEnabled = false
