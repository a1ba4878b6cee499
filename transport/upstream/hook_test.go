package upstream

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/inferrail/inferrail/sim"
)

// hookCtx is a cancellable Context with a CancelHook, as the gateway's
// attempt contexts are; it counts the hook's use.
type hookCtx struct {
	context.Context
	cancel context.CancelCauseFunc

	mu           sync.Mutex
	hook         func()
	set, cleared int
	cancelled    bool
}

func newHookCtx() *hookCtx {
	ctx, cancel := context.WithCancelCause(context.Background())
	return &hookCtx{Context: ctx, cancel: cancel}
}

func (h *hookCtx) OnCancel(f func()) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.set++
	if h.cancelled {
		go f()
		return
	}
	h.hook = f
}

func (h *hookCtx) ClearCancel() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	had := h.hook != nil
	if had {
		h.cleared++
	}
	h.hook = nil
	return had
}

func (h *hookCtx) Cause() error { return context.Cause(h.Context) }

func (h *hookCtx) fire(cause error) {
	h.cancel(cause)
	h.mu.Lock()
	f := h.hook
	h.hook, h.cancelled = nil, true
	h.mu.Unlock()
	if f != nil {
		go f()
	}
}

// A Context with a CancelHook gets the close of the request's connection
// there, not through context.AfterFunc: a response read to its end clears
// it and its connection is reused; a cancel runs it, and Read returns at
// once with the context's error and the cause the Context tells.
func TestCancelHook(t *testing.T) {
	s := startSim(t, zero)
	p := newPool(t, s.URL(), Options{})
	for range 2 {
		h := newHookCtx()
		doCtx(t, h, p, chatPath, chatBody)
		if h.set != 1 || h.cleared != 1 {
			t.Fatalf("hook set %d, cleared %d; want 1 and 1", h.set, h.cleared)
		}
	}
	if st := p.Stats(); st.Dials != 1 {
		t.Fatalf("completed responses: %+v, want one connection reused", st)
	}

	s.SetFault(sim.Fault{Kind: sim.FaultHang})
	h := newHookCtx()
	req := newReq(chatPath, chatBody)
	defer fasthttp.ReleaseRequest(req)
	ch := doAsync(h, p, req)
	time.Sleep(30 * time.Millisecond)
	h.fire(errClientGone)
	select {
	case r := <-ch:
		if !errors.Is(r.err, context.Canceled) || !errors.Is(r.err, errClientGone) {
			t.Fatalf("got %v, want context.Canceled and its cause", r.err)
		}
	case <-time.After(time.Second):
		t.Fatal("Do still blocked after the hook's cancel")
	}
}
