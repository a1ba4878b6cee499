package stress

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"github.com/inferrail/inferrail/bench/loadgen"
)

// Memory bounds (issue 8's targets, in MiB).
const (
	maxSoakGrowth = 10 << 20
	maxStallHeld  = 20 << 20
)

func runSoak(t *T) error {
	n, warm := pick(t, 100000, 20000), pick(t, 5000, 2000)
	const workers = 32
	sims, err := t.startChildSims(3, "--zero-latency")
	if err != nil {
		return err
	}
	var urls []string
	for _, p := range sims {
		urls = append(urls, p.URL)
	}
	gw, err := t.startGateway(urls, nil)
	if err != nil {
		return err
	}
	hc := t.client(gw.Addr, workers)
	// A mix: completions and chats, streamed and not, 1 to 4 tokens, every
	// prompt new.
	spec := func(i int) loadgen.Spec {
		s := specN("soak", i, 1+i%4, i%2 == 1)
		s.Chat = i%4 >= 2
		return s
	}
	run := func(from, count int) (failed int, kinds map[string]int, took time.Duration) {
		kinds = map[string]int{}
		var mu sync.Mutex
		var next atomic.Int64
		next.Store(int64(from))
		end := int64(from + count)
		start := time.Now()
		var wg sync.WaitGroup
		for range workers {
			wg.Go(func() {
				for {
					i := next.Add(1) - 1
					if i >= end || t.ctx.Err() != nil {
						return
					}
					s := spec(int(i))
					a := post(hc, s.Path(), bodyFor(s), 30*time.Second)
					if err := a.check(s); err != nil {
						mu.Lock()
						failed++
						addKind(kinds, err.Error())
						mu.Unlock()
					}
				}
			})
		}
		wg.Wait()
		return failed, kinds, time.Since(start)
	}
	wfailed, wkinds, _ := run(0, warm)
	t.Checkf(wfailed == 0, "%d of %d warm-up requests failed: %v", wfailed, warm, wkinds)
	before, err := settledMemory()
	if err != nil {
		return err
	}
	failed, kinds, took := run(warm, n)
	after, err := settledMemory()
	if err != nil {
		return err
	}
	growth := after.RSS - before.RSS
	t.Figf("%d requests (after %d to warm up) by %d clients at %.0f/s, %d errors; resident memory %.1f → %.1f MiB (%+.1f MiB), heap in use %+.1f MiB",
		n, warm, workers, float64(n)/took.Seconds(), failed, mib(before.RSS), mib(after.RSS), mib(growth),
		mib(int64(after.Heap)-int64(before.Heap)))
	t.Checkf(failed == 0, "%d of %d requests failed: %v", failed, n, kinds)
	t.Checkf(growth <= maxSoakGrowth, "resident memory grew %.1f MiB, want ≤ %d MiB", mib(growth), maxSoakGrowth>>20)
	return nil
}

// stalled is one client of the stall scenario: it reads the response head
// and a little of the stream, stops reading, and later reads the rest.
type stalled struct {
	c    *rawConn
	body io.Reader
	read int64 // bytes of the body read so far
	tail tail
	err  error
}

func runStall(t *T) error {
	clients := 20
	perClient := int64(pick(t, 32<<20, 16<<20)) // 640 MiB in all, 320 MiB short
	hold := pick(t, 4*time.Second, 2*time.Second)
	// One engine out of process, able to hold every stream: zero latency, a
	// context long enough for the answers and blocks for all of them.
	const maxLen = 400000
	sims, err := t.startChildSims(1, "--zero-latency", "--max-model-len", fmt.Sprint(maxLen),
		"--num-gpu-blocks-override", fmt.Sprint(clients*(maxLen/16+2)), "--max-num-seqs", fmt.Sprint(clients),
		"--max-num-batched-tokens", "8192")
	if err != nil {
		return err
	}
	gw, err := t.startGateway([]string{sims[0].URL}, nil)
	if err != nil {
		return err
	}
	// How many bytes a token costs on the wire, from a short stream.
	probe := specN("stall-probe", 0, 2000, true)
	probe.Usage = false
	pr := streamBytes(t.ctx, gw.Addr, probe)
	if pr.err != nil {
		return fmt.Errorf("probe stream: %w", pr.err)
	}
	tokens := int(perClient/(pr.n/2000)) + 1000
	if tokens >= maxLen-100 {
		return fmt.Errorf("%d tokens per stream do not fit --max-model-len %d", tokens, maxLen)
	}

	base, err := settledMemory()
	if err != nil {
		return err
	}
	if err := resetPeak(); err != nil {
		return err
	}
	ss := make([]*stalled, clients)
	deadline := time.Now().Add(3 * time.Minute)
	for i := range ss {
		s := &stalled{}
		ss[i] = s
		spec := specN("stall", i, tokens, true)
		spec.Usage = false
		s.c, s.err = dialRaw(t.ctx, gw.Addr)
		if s.err != nil {
			continue
		}
		t.Cleanup(func() { s.c.Close() })
		s.c.SetDeadline(deadline)
		if _, s.err = s.c.Write(postRequest(gw.Addr, spec.Path(), bodyFor(spec))); s.err != nil {
			continue
		}
		resp, err := s.c.readResponse()
		if err != nil {
			s.err = fmt.Errorf("response head: %w", err)
			continue
		}
		if resp.StatusCode != 200 {
			s.err = fmt.Errorf("status %d", resp.StatusCode)
			continue
		}
		s.body = resp.Body
		// Read the first 64 KiB, then stop.
		n, err := io.CopyN(io.Discard, s.body, 64<<10)
		s.read, s.err = n, err
	}
	// Everyone has stopped reading; the engine keeps generating. Hold, then
	// see what the gateway holds.
	if !sleepCtx(t.ctx, hold) {
		return t.ctx.Err()
	}
	held, err := readMemory()
	if err != nil {
		return err
	}
	heldSettled, err := settledMemory()
	if err != nil {
		return err
	}
	stallPeak := held.Peak - base.RSS

	// Now read everything, all clients at once.
	start := time.Now()
	var wg sync.WaitGroup
	for _, s := range ss {
		if s.err != nil {
			continue
		}
		wg.Go(func() {
			buf := make([]byte, 64<<10)
			for {
				n, err := s.body.Read(buf)
				if n > 0 {
					s.read += int64(n)
					s.tail.add(buf[:n])
				}
				if err == io.EOF {
					return
				}
				if err != nil {
					s.err = err
					return
				}
			}
		})
	}
	wg.Wait()
	drain := time.Since(start)
	peak, err := readMemory()
	if err != nil {
		return err
	}
	var total int64
	failed := 0
	for i, s := range ss {
		total += s.read
		switch {
		case s.err != nil:
			failed++
			t.Failf("client %d: %v", i, s.err)
		case !bytes.HasSuffix(s.tail.bytes(), []byte("data: [DONE]\n\n")):
			failed++
			t.Failf("client %d: stream ended without [DONE] after %d bytes", i, s.read)
		}
	}
	t.Figf("%d clients stopped reading %d-token streams (%.0f MiB each) after 64 KiB, for %s: the gateway held %.1f MiB above the settled %.1f MiB at the peak (%.1f MiB once collected)",
		clients, tokens, mib(perClient), hold, mib(stallPeak), mib(base.RSS), mib(heldSettled.RSS-base.RSS))
	t.Figf("then read to the end: %.0f MiB in %.1f s (%.0f MiB/s), %d streams incomplete; peak over the whole run %.1f MiB above settled",
		mib(total), drain.Seconds(), mib(total)/drain.Seconds(), failed, mib(peak.Peak-base.RSS))
	t.Checkf(stallPeak <= maxStallHeld, "the gateway held %.1f MiB while its clients stalled, want ≤ %d MiB", mib(stallPeak), maxStallHeld>>20)
	t.Checkf(total >= int64(clients)*perClient, "only %.0f MiB streamed, want %.0f MiB", mib(total), mib(int64(clients)*perClient))
	return nil
}

// tail keeps the last bytes of a stream without allocating as it goes.
type tail struct {
	buf [64]byte
	n   int // bytes in buf, at its end
}

func (t *tail) add(p []byte) {
	if len(p) >= len(t.buf) {
		copy(t.buf[:], p[len(p)-len(t.buf):])
		t.n = len(t.buf)
		return
	}
	copy(t.buf[:], t.buf[len(p):])
	copy(t.buf[len(t.buf)-len(p):], p)
	t.n = min(t.n+len(p), len(t.buf))
}

func (t *tail) bytes() []byte { return t.buf[len(t.buf)-t.n:] }

// streamed is how many body bytes a stream had.
type streamed struct {
	n   int64
	err error
}

// streamBytes sends spec and counts the bytes of its body.
func streamBytes(ctx context.Context, addr string, spec loadgen.Spec) streamed {
	c, err := dialRaw(ctx, addr)
	if err != nil {
		return streamed{err: err}
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := c.Write(postRequest(addr, spec.Path(), bodyFor(spec))); err != nil {
		return streamed{err: err}
	}
	resp, err := c.readResponse()
	if err != nil {
		return streamed{err: err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return streamed{err: fmt.Errorf("status %d", resp.StatusCode)}
	}
	n, err := io.Copy(io.Discard, resp.Body)
	return streamed{n: n, err: err}
}
