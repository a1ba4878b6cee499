// Package progress draws a one-line progress bar with an ETA, redrawn in
// place, for the long batch commands (bench sweeps, whatif). It lives in sim/
// so that both bench/ and sim/ can use it without bench/ being imported from
// sim/.
//
// progress starts no goroutines and keeps no globals. A Bar is safe for
// concurrent use.
package progress

import (
	"fmt"
	"io"
	"sync"
	"time"
)

// width is the bar's length in characters.
const width = 30

// Bar draws "[####......] done/total noun (n resumed), elapsed, ETA".
// The ETA extrapolates the mean wall time of the units done in this process
// (resumed ones cost nothing) over the units left.
type Bar struct {
	w    io.Writer
	noun string

	mu                   sync.Mutex
	total, skipped, done int
	start                time.Time
}

// New returns a bar over total units named noun ("runs", "points"), of
// which skipped were resumed from earlier work, and draws it. A nil w draws
// nothing.
func New(w io.Writer, noun string, total, skipped int) *Bar {
	b := &Bar{w: w, noun: noun, total: total, skipped: skipped, start: time.Now()}
	b.Draw()
	return b
}

// Finished counts one unit done and redraws.
func (b *Bar) Finished() {
	b.mu.Lock()
	b.done++
	b.mu.Unlock()
	b.Draw()
}

// Resumed counts one unit found done by earlier work and redraws.
func (b *Bar) Resumed() {
	b.mu.Lock()
	b.skipped++
	b.mu.Unlock()
	b.Draw()
}

// AddTotal changes the total by delta, for work whose size is known only as
// it goes (a search that stops early drops the units it no longer needs).
func (b *Bar) AddTotal(delta int) {
	b.mu.Lock()
	b.total = max(b.total+delta, b.done+b.skipped)
	b.mu.Unlock()
	b.Draw()
}

// Draw redraws the line.
func (b *Bar) Draw() {
	if b.w == nil {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	all := b.done + b.skipped
	fill := 0
	if b.total > 0 {
		fill = min(all*width/b.total, width)
	}
	bar := make([]byte, width)
	for i := range bar {
		bar[i] = '.'
		if i < fill {
			bar[i] = '#'
		}
	}
	el := time.Since(b.start)
	eta := "?"
	if b.done > 0 {
		left := max(b.total-all, 0)
		eta = (el / time.Duration(b.done) * time.Duration(left)).Round(time.Second).String()
	}
	fmt.Fprintf(b.w, "\r[%s] %d/%d %s (%d resumed), %v elapsed, ETA %s   ", bar, all, b.total, b.noun, b.skipped,
		el.Round(time.Second), eta)
}

// End ends the line.
func (b *Bar) End() {
	if b.w != nil {
		fmt.Fprintln(b.w)
	}
}
