package sim

import (
	"context"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inferrail/inferrail/model/kvevent"
	"github.com/inferrail/inferrail/sim/engine"
)

// job is one request's shared state between its HTTP handler and the driver.
//
// The driver owns req after submission. It publishes progress through the
// atomics and wakes the handler through notify (capacity 1, non-blocking
// send), so a client that stops reading never slows the engine and costs a
// constant amount of memory however far it falls behind.
type job struct {
	req      engine.Request
	seed     uint64 // generated text seed
	maxParam int    // the request's max_tokens, 0 when unset (for metrics)
	notify   chan struct{}

	// state is the output tokens produced so far, shifted left by one,
	// with the low bit set once the job is done: one word, so that a reader
	// never sees the last token without seeing that it was the last (the
	// stream puts the last token on the finish chunk, as vLLM does). The
	// fields below it are valid once the done bit is set.
	state  atomic.Int64
	gone   atomic.Bool // the client has disconnected
	reason string      // "stop", "length" or "abort"
	cached int         // prefix cache hit at admission

	// Driver-owned: when the last token came and the gaps between tokens,
	// for vLLM's inter-token latency histogram.
	lastToken time.Duration
	gaps      []time.Duration
}

func newJob() *job { return &job{notify: make(chan struct{}, 1)} }

// progress returns how many output tokens the job has produced and whether
// it is done, as of one step.
func (j *job) progress() (generated int, done bool) {
	s := j.state.Load()
	return int(s >> 1), s&1 == 1
}

func (j *job) isDone() bool { return j.state.Load()&1 == 1 }

// clientGone is the watcher's callback: it marks the client gone and wakes
// the handler, which aborts the request. It never blocks.
func (j *job) clientGone(error) {
	j.gone.Store(true)
	j.wake()
}

func (j *job) wake() {
	select {
	case j.notify <- struct{}{}:
	default:
	}
}

type cmdKind uint8

const (
	cmdAdd cmdKind = iota
	cmdAbort
	cmdReset
	cmdInspect
)

type command struct {
	kind  cmdKind
	job   *job
	reply chan bool // cmdAdd: accepted; cmdReset: reset succeeded
	fn    func(*engine.Engine)
}

// driver runs the engine in steps on a virtual timeline. One goroutine owns
// the engine; handlers talk to it only through inbox.
//
// Step k+1 starts when step k ends on the virtual timeline, not when the
// goroutine woke up, so timer overshoot never accumulates. When the engine is
// idle the timeline jumps to the real clock.
type driver struct {
	eng     *engine.Engine
	zero    bool
	inbox   chan command
	epoch   time.Time
	onStep  func(res *engine.StepResult, end time.Duration)
	onBatch func(events []kvevent.Event)

	stop context.CancelFunc
	wg   sync.WaitGroup
	quit chan struct{} // closed when the loop has exited
}

func newDriver(eng *engine.Engine, zero bool) *driver {
	return &driver{
		eng:   eng,
		zero:  zero,
		inbox: make(chan command, 4096),
		epoch: time.Now(),
		quit:  make(chan struct{}),
	}
}

func (d *driver) start() {
	ctx, cancel := context.WithCancel(context.Background())
	d.stop = cancel
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer close(d.quit)
		d.loop(ctx)
	}()
}

// close stops the loop and waits for it. Requests still in the engine are
// finished as aborted so that their handlers return.
func (d *driver) close() {
	d.stop()
	d.wg.Wait()
}

// now is the real clock as a virtual time.
func (d *driver) now() time.Duration { return time.Since(d.epoch) }

// submit hands j to the engine. It returns false when the driver has stopped
// or the engine refused the request.
func (d *driver) submit(j *job) bool { return d.call(command{kind: cmdAdd, job: j}) }

// abort withdraws j. The engine reports it done in its next step; the
// handler that asked need not wait for that.
func (d *driver) abort(j *job) {
	select {
	case d.inbox <- command{kind: cmdAbort, job: j}:
	case <-d.quit:
	}
}

// resetPrefixCache asks the engine to drop its cached blocks.
func (d *driver) resetPrefixCache() bool { return d.call(command{kind: cmdReset}) }

// inspect runs fn on the driver goroutine, between steps, and waits for it.
func (d *driver) inspect(fn func(*engine.Engine)) bool {
	return d.call(command{kind: cmdInspect, fn: fn})
}

// call sends c and waits for its reply. It returns false when the driver has
// stopped before answering.
func (d *driver) call(c command) bool {
	c.reply = make(chan bool, 1)
	select {
	case d.inbox <- c:
	case <-d.quit:
		return false
	}
	select {
	case ok := <-c.reply:
		return ok
	case <-d.quit:
		return false
	}
}

func (d *driver) apply(c command, vnow time.Duration) {
	switch c.kind {
	case cmdAdd:
		c.job.req.Arrival = vnow
		c.job.req.Ctx = c.job
		c.reply <- d.eng.Add(&c.job.req) == nil
	case cmdAbort:
		d.eng.Abort(c.job.req.ID)
	case cmdInspect:
		c.fn(d.eng)
		c.reply <- true
	case cmdReset:
		// The AllBlocksCleared event comes out of the next Step; the engine
		// stays non-idle until it has.
		c.reply <- d.eng.ResetPrefixCache()
	}
}

func (d *driver) loop(ctx context.Context) {
	defer d.drainOnExit()
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	var vnow time.Duration // end of the last step
	for {
		// Between steps: take every pending command. Block only when idle.
		for {
			if d.eng.Idle() {
				select {
				case c := <-d.inbox:
					if rn := d.now(); rn > vnow {
						vnow = rn
					}
					d.apply(c, vnow)
					continue
				case <-ctx.Done():
					return
				}
			}
			select {
			case c := <-d.inbox:
				d.apply(c, max(vnow, d.now()))
				continue
			case <-ctx.Done():
				return
			default:
			}
			break
		}
		res := d.eng.Step(vnow)
		end := vnow + res.Duration
		if !d.zero && res.Duration > 0 {
			if wait := end - d.now(); wait > 0 {
				timer.Reset(wait)
				select {
				case <-timer.C:
				case <-ctx.Done():
					timer.Stop()
					return
				}
			}
		}
		vnow = end
		d.deliver(&res, end)
	}
}

func (d *driver) deliver(res *engine.StepResult, end time.Duration) {
	if d.onStep != nil {
		d.onStep(res, end)
	}
	if len(res.Events) > 0 && d.onBatch != nil {
		d.onBatch(res.Events)
	}
	for i := range res.Outputs {
		o := &res.Outputs[i]
		j := o.Req.Ctx.(*job)
		switch {
		case o.Done:
			j.reason = o.Reason
			j.cached = o.Req.CachedTokens
			j.state.Store(int64(o.Req.Generated)<<1 | 1)
		case o.NewTokens > 0:
			j.state.Store(int64(o.Req.Generated) << 1)
		}
		j.wake()
	}
}

// drainOnExit fails every command still queued so that no handler waits forever.
func (d *driver) drainOnExit() {
	for {
		select {
		case c := <-d.inbox:
			if c.reply != nil {
				c.reply <- false
			}
		default:
			return
		}
	}
}

func itoa(n int) string { return strconv.Itoa(n) }
