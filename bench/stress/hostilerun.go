package stress

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"
	"unicode/utf8"

	"github.com/inferrail/inferrail/config"
)

// reply is one answer a hostile client read.
type reply struct {
	status int
	header http.Header
	body   []byte
}

// exchange is what became of one hostile exchange.
type exchange struct {
	replies  []reply
	closed   bool  // the server closed before every wanted answer came
	timedOut bool  // nothing came within the exchange's time
	extra    bool  // an answer came after the wanted ones (noExtra)
	err      error // the answers could not be read as HTTP
}

// run performs h against addr within timeout.
func (h *hostile) run(ctx context.Context, addr string, timeout time.Duration) exchange {
	var ex exchange
	c, err := dialRaw(ctx, addr)
	if err != nil {
		ex.err = err
		return ex
	}
	c.SetDeadline(time.Now().Add(timeout))
	got100 := make(chan struct{})
	done := make(chan struct{})
	steps := h.build()
	var wg sync.WaitGroup
	wg.Go(func() { write(c, steps, got100, done) })
	defer func() {
		close(done)
		c.Close()
		wg.Wait()
	}()
	seen100 := false
	for len(ex.replies) < len(h.want) {
		method := "POST"
		if h.want[len(ex.replies)].head {
			method = "HEAD"
		}
		resp, err := http.ReadResponse(c.br, &http.Request{Method: method})
		if err != nil {
			ex.classify(err)
			return ex
		}
		if resp.StatusCode >= 100 && resp.StatusCode < 200 {
			if resp.StatusCode == 100 && !seen100 {
				seen100 = true
				close(got100)
			}
			continue
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		ex.replies = append(ex.replies, reply{status: resp.StatusCode, header: resp.Header, body: body})
		if err != nil {
			ex.classify(err)
			return ex
		}
	}
	if h.noExtra {
		c.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
		if resp, err := http.ReadResponse(c.br, nil); err == nil {
			resp.Body.Close()
			ex.extra = true
		}
	}
	return ex
}

// classify records why reading stopped.
func (ex *exchange) classify(err error) {
	var ne net.Error
	switch {
	case errors.As(err, &ne) && ne.Timeout():
		ex.timedOut = true
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, net.ErrClosed), errors.Is(err, syscall.EPIPE):
		ex.closed = true
	default:
		ex.err = err
	}
}

// write performs steps on c until they end, the connection fails or done
// closes.
func write(c *rawConn, steps []step, got100, done <-chan struct{}) {
	for _, s := range steps {
		if s.drip > 0 {
			for i := range s.write {
				t := time.NewTimer(s.drip)
				select {
				case <-t.C:
				case <-done:
					t.Stop()
					return
				}
				if _, err := c.Write(s.write[i : i+1]); err != nil {
					return
				}
			}
		} else if _, err := c.Write(s.write); err != nil {
			return
		}
		if s.await100 {
			t := time.NewTimer(time.Second)
			select {
			case <-got100:
			case <-t.C:
			case <-done:
				t.Stop()
				return
			}
			t.Stop()
		}
	}
}

// judge returns what is wrong with the answers of ex to h, one line per
// problem; none when every answer is acceptable.
func (h *hostile) judge(ex exchange) []string {
	var bad []string
	for i, e := range h.want {
		if i < len(ex.replies) {
			if err := e.check(&ex.replies[i]); err != nil {
				bad = append(bad, err.Error())
			}
			continue
		}
		switch {
		case ex.closed && e.close:
		case ex.closed:
			bad = append(bad, "connection closed without an answer")
		case ex.timedOut:
			bad = append(bad, "no answer in time")
		case ex.err != nil:
			bad = append(bad, "unreadable answer: "+ex.err.Error())
		}
		break // the connection is gone: later requests have no answer to judge
	}
	if ex.extra {
		bad = append(bad, "an answer to a request smuggled in the body")
	}
	return bad
}

// check returns why r is not an acceptable answer under e.
func (e expect) check(r *reply) error {
	if id := r.header.Get("X-Request-Id"); id != "" && !validID(id) {
		return fmt.Errorf("status %d with an unsafe X-Request-Id %q", r.status, trimString(id, 40))
	}
	switch {
	case r.status >= 500:
		return fmt.Errorf("gateway answered %d: %s", r.status, trim(r.body, 120))
	case r.status == 200:
		if !e.ok {
			return fmt.Errorf("200 for a request that must be refused")
		}
		if e.id != "" && r.header.Get("X-Request-Id") != e.id {
			return fmt.Errorf("answer with X-Request-Id %q where %q was due: out of order", r.header.Get("X-Request-Id"), e.id)
		}
		return nil
	case r.status >= 400 && r.status < 500:
		if e.no4xx {
			return fmt.Errorf("%d for a valid request: %s", r.status, trim(r.body, 120))
		}
		if len(e.statuses) > 0 && !slices.Contains(e.statuses, r.status) {
			return fmt.Errorf("%d, want %v: %s", r.status, e.statuses, trim(r.body, 120))
		}
		if e.head {
			return nil
		}
		return errorShape(r)
	}
	return fmt.Errorf("unexpected status %d", r.status)
}

// errorShape checks that r's body is an OpenAI error:
// {"error":{"message":"…","type":"…","param":null|"…","code":<status>}}.
func errorShape(r *reply) error {
	if ct := r.header.Get("Content-Type"); !strings.HasPrefix(ct, "application/json") {
		return fmt.Errorf("%d with Content-Type %q, body %q", r.status, ct, trim(r.body, 80))
	}
	if !utf8.Valid(r.body) {
		return fmt.Errorf("%d with a body that is not UTF-8", r.status)
	}
	var v struct {
		Error *struct {
			Message *string         `json:"message"`
			Type    *string         `json:"type"`
			Param   json.RawMessage `json:"param"`
			Code    *int            `json:"code"`
		} `json:"error"`
	}
	if err := json.Unmarshal(r.body, &v); err != nil {
		return fmt.Errorf("%d with a body that is not JSON: %v", r.status, err)
	}
	switch er := v.Error; {
	case er == nil:
		return fmt.Errorf("%d without an error object: %s", r.status, trim(r.body, 80))
	case er.Message == nil || er.Type == nil:
		return fmt.Errorf("%d whose error lacks message or type: %s", r.status, trim(r.body, 80))
	case er.Code == nil || *er.Code != r.status:
		return fmt.Errorf("%d whose error code is not the status: %s", r.status, trim(r.body, 80))
	case len(er.Param) > 0 && string(er.Param) != "null" && er.Param[0] != '"':
		return fmt.Errorf("%d whose error param is neither null nor a string: %s", r.status, trim(r.body, 80))
	}
	return nil
}

// validID reports whether id is safe to pass on as an X-Request-Id: 1 to
// 128 characters from a set that is safe in headers, logs and ids.
func validID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for _, c := range []byte(id) {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		case strings.IndexByte("-_.:~@/+=", c) >= 0:
		default:
			return false
		}
	}
	return true
}

func trimString(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// kindTally is the outcome of every hostile request of one kind.
type kindTally struct {
	requests, closed, failed int
	statuses                 map[int]int
	failures                 map[string]int
}

func runHostile(t *T) error {
	reqTimeout := 5 * time.Second
	total := 3000
	sz := hostileSizes{
		MaxBody:  int(config.Default().Server.MaxBodyBytes),
		Deep:     pick(t, 100000, 20000),
		OneByte:  8 << 20,
		OneByteN: pick(t, 3, 1),
		HeavyN:   pick(t, 3, 1),
		SlowN:    pick(t, 40, 10),
	}
	// The simulators run as processes of their own, so that the memory
	// figure is the gateway's (and the clients'), not the engines' parsing
	// the bodies the gateway passed on.
	sims, err := t.startChildSims(2, "--zero-latency")
	if err != nil {
		return err
	}
	gw, err := t.startGateway([]string{sims[0].URL, sims[1].URL}, func(c *config.Config) { c.Server.RequestTimeout = reqTimeout })
	if err != nil {
		return err
	}
	cases := hostileCases(20261129, total, sz)
	exchanges := make([]exchange, len(cases))
	timeout := reqTimeout + 10*time.Second

	// First the exchanges whose memory is measured, one at a time: the
	// client's bytes are built before the baseline, so the peak above it
	// is what the gateway held while the body arrived.
	peaks := map[string]int64{}
	var names []string
	start := time.Now()
	for i := range cases {
		h := &cases[i]
		if !h.memory {
			continue
		}
		steps := h.build()
		base, err := settledMemory()
		if err != nil {
			return err
		}
		if err := resetPeak(); err != nil {
			return err
		}
		one := hostile{steps: steps, want: h.want}
		exchanges[i] = one.run(t.ctx, gw.Addr, timeout)
		peak, err := readMemory()
		if err != nil {
			return err
		}
		if _, seen := peaks[h.name]; !seen {
			names = append(names, h.name)
		}
		peaks[h.name] = max(peaks[h.name], peak.Peak-base.RSS)
	}
	// Then the rest at once: the slow ones each on a goroutine of its own
	// (they wait for the read timeout), the others through 16 workers.
	var wg sync.WaitGroup
	work := make(chan int)
	for range 16 {
		wg.Go(func() {
			for i := range work {
				exchanges[i] = cases[i].run(t.ctx, gw.Addr, timeout)
			}
		})
	}
	for i := range cases {
		if cases[i].slow() {
			wg.Go(func() { exchanges[i] = cases[i].run(t.ctx, gw.Addr, timeout) })
		}
	}
	for i := range cases {
		if !cases[i].slow() && !cases[i].memory {
			work <- i
		}
	}
	close(work)
	wg.Wait()
	took := time.Since(start)

	tallies := map[string]*kindTally{}
	requests, failed := 0, 0
	for i, h := range cases {
		kt := tallies[h.kind]
		if kt == nil {
			kt = &kindTally{statuses: map[int]int{}, failures: map[string]int{}}
			tallies[h.kind] = kt
		}
		ex := exchanges[i]
		kt.requests += len(h.want)
		requests += len(h.want)
		for _, r := range ex.replies {
			kt.statuses[r.status]++
		}
		if n := len(h.want) - len(ex.replies); n > 0 && ex.closed {
			kt.closed += n
		}
		if bad := h.judge(ex); len(bad) > 0 {
			kt.failed++
			failed++
			for _, b := range bad {
				addKind(kt.failures, h.name+": "+b)
			}
		}
	}
	var parts []string
	for _, k := range hostileKinds {
		kt := tallies[k]
		if kt == nil {
			continue
		}
		s := fmt.Sprintf("%s %d (%s", k, kt.requests, formatStatuses(kt.statuses))
		if kt.closed > 0 {
			s += fmt.Sprintf(", closed ×%d", kt.closed)
		}
		parts = append(parts, s+")")
	}
	t.Figf("%d hostile requests over %d connections in %.1f s: %s", requests, len(cases), took.Seconds(), strings.Join(parts, "; "))
	var mem []string
	for _, n := range names {
		mem = append(mem, fmt.Sprintf("%s %.1f MiB", n, mib(peaks[n])))
	}
	t.Figf("gateway memory held while a body arrives (peak above settled, alone): %s", strings.Join(mem, ", "))
	t.Checkf(requests >= total, "only %d hostile requests, want at least %d", requests, total)
	for _, k := range hostileKinds {
		if kt := tallies[k]; kt != nil && kt.failed > 0 {
			t.Failf("%s: %d exchanges answered wrongly: %s", k, kt.failed, formatKinds(kt.failures))
		}
	}

	// Still serving: a normal request, /health, no lease left behind.
	hc := t.client(gw.Addr, 2)
	a := post(hc, completionsPath, bodyFor(specN("after-hostile", 0, 1, false)), 10*time.Second)
	servingErr := a.check(specN("after-hostile", 0, 1, false))
	rs, leaseErr := gw.waitReplicas(t.ctx, 5*time.Second, idle)
	t.Figf("%d exchanges judged wrong; afterwards a request is served (%v) and %d leases are held", failed, errString(servingErr), leases(rs))
	t.Checkf(servingErr == nil, "the gateway no longer serves: %v", servingErr)
	t.Checkf(leaseErr == nil, "leases held after the hostile requests: %v", leaseErr)
	for _, s := range sims {
		t.Checkf(s.Alive(), "simulator %s died: %s", s.Name, s.Output())
	}
	return nil
}

func errString(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// formatKinds renders error texts with their counts, most common first.
func formatKinds(m map[string]int) string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return m[keys[i]] > m[keys[j]] || m[keys[i]] == m[keys[j]] && keys[i] < keys[j] })
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s (×%d)", k, m[k])
	}
	return strings.Join(parts, "; ")
}
