package loadgen

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"syscall"
	"time"
)

// Schedule is an open-loop send schedule: request i is due at i/Rate
// seconds after the start, whatever became of the requests before it, so
// a slow answer delays no later request and cannot hide its own cost
// (what Gil Tene calls coordinated omission).
type Schedule struct {
	Rate float64 // requests per second, > 0
	N    int     // requests
}

// At is when request i is due, counted from the start. Each offset is
// computed from i, not summed from the one before, so no rounding piles up.
func (s Schedule) At(i int) time.Duration {
	return time.Duration(float64(i) * float64(time.Second) / s.Rate)
}

// Interval is the time between two sends.
func (s Schedule) Interval() time.Duration { return s.At(1) }

// Span is when the last request is due.
func (s Schedule) Span() time.Duration {
	if s.N <= 0 {
		return 0
	}
	return s.At(s.N - 1)
}

// Validate reports a schedule that cannot be run.
func (s Schedule) Validate() error {
	if !(s.Rate > 0) || s.Rate > 1e7 {
		return fmt.Errorf("rate %v: want 0 < rate ≤ 10,000,000 per second", s.Rate)
	}
	if s.N <= 0 {
		return fmt.Errorf("requests %d: want at least 1", s.N)
	}
	return nil
}

// OpenLoopResult is what one open-loop run measured, request by request.
// Index i is request i; the slices are read-only once Run returns.
type OpenLoopResult struct {
	Schedule Schedule
	Start    time.Time
	// Lag is how long after its due time request i was handed to the
	// client: the load generator's own delay (timer wake-up, scheduling).
	Lag []time.Duration
	// Latency is from request i's due time, not its actual send, to the end
	// of its response; it includes Lag, as a user arriving on schedule
	// would see it. Zero for a request that failed.
	Latency []time.Duration
	Errs    []error
	// LastSent is when the last request was handed to the client.
	LastSent time.Time
}

// OK is the latencies of the requests that succeeded.
func (r *OpenLoopResult) OK() []time.Duration {
	out := make([]time.Duration, 0, len(r.Latency))
	for i, l := range r.Latency {
		if r.Errs[i] == nil {
			out = append(out, l)
		}
	}
	return out
}

// Errors counts the requests that failed.
func (r *OpenLoopResult) Errors() int {
	n := 0
	for _, err := range r.Errs {
		if err != nil {
			n++
		}
	}
	return n
}

// ErrorKinds is the first few distinct error texts with their counts.
func (r *OpenLoopResult) ErrorKinds() map[string]int {
	kinds := map[string]int{}
	for _, err := range r.Errs {
		if err == nil {
			continue
		}
		msg := err.Error()
		if len(msg) > 200 {
			msg = msg[:200] + "…"
		}
		if _, seen := kinds[msg]; seen || len(kinds) < 10 {
			kinds[msg]++
		}
	}
	return kinds
}

// AchievedRate is the send rate the run really had: requests handed to the
// client per second from the start to the last send.
func (r *OpenLoopResult) AchievedRate() float64 {
	span := r.LastSent.Sub(r.Start)
	if r.Schedule.N < 2 || span <= 0 {
		return 0
	}
	return float64(r.Schedule.N-1) / span.Seconds()
}

// RunOpenLoop sends s.N requests on schedule s: do(ctx, i) sends request i
// and returns once its response has been read to its end, or failed. Each
// request runs in a goroutine of its own, started at its due time, so
// nothing waits for an earlier answer. RunOpenLoop returns when every
// request has returned; ctx bounds the whole run, and do must honour it.
func RunOpenLoop(ctx context.Context, s Schedule, do func(ctx context.Context, i int) error) (*OpenLoopResult, error) {
	if err := s.Validate(); err != nil {
		return nil, err
	}
	r := &OpenLoopResult{
		Schedule: s,
		Lag:      make([]time.Duration, s.N),
		Latency:  make([]time.Duration, s.N),
		Errs:     make([]error, s.N),
	}
	var wg sync.WaitGroup
	p := newPacer()
	r.Start = time.Now()
	for i := range s.N {
		due := r.Start.Add(s.At(i))
		p.sleepUntil(due)
		if ctx.Err() != nil {
			for j := i; j < s.N; j++ {
				r.Errs[j] = fmt.Errorf("not sent: %w", ctx.Err())
			}
			break
		}
		wg.Go(func() {
			r.Lag[i] = time.Since(due)
			err := do(ctx, i)
			r.Latency[i] = time.Since(due)
			r.Errs[i] = err
		})
		r.LastSent = time.Now()
	}
	p.close()
	wg.Wait()
	return r, ctx.Err()
}

// pacer sleeps until a moment with the precision of the kernel's
// high-resolution timers. Go's own timers wake through the network poller,
// whose epoll wait counts in whole milliseconds: time.Sleep(500µs) on Linux
// sleeps about a millisecond (golang/go#44343), which would send a 2,000/s
// schedule in bursts of two. nanosleep(2) on a thread of its own, with a
// timer slack of 1µs instead of the default 50µs (prctl PR_SET_TIMERSLACK),
// wakes within tens of microseconds. The thread is unlocked again by close,
// so that Go never ends it (Proc relies on that).
type pacer struct{}

func newPacer() *pacer {
	runtime.LockOSThread()
	const prSetTimerslack = 29                                      // <linux/prctl.h>
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerslack, 1000, 0) // ns; best effort
	return &pacer{}
}

func (*pacer) sleepUntil(t time.Time) {
	for {
		d := time.Until(t)
		if d <= 0 {
			return
		}
		ts := syscall.NsecToTimespec(int64(d))
		if syscall.Nanosleep(&ts, nil) == nil {
			return
		}
		// EINTR: the runtime's preemption signal; sleep on.
	}
}

func (*pacer) close() {
	const prSetTimerslack = 29
	syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerslack, 0, 0) // 0: back to the thread's default
	runtime.UnlockOSThread()
}
