package replica

import (
	"reflect"

	"github.com/asynkron/protoactor-go/actor"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/dump"
	"github.com/inferrail/inferrail/model/estimate"
	"github.com/inferrail/inferrail/model/prefix"
)

// A replica actor warmed with a peer's dump of the same replica predicts
// what the peer predicts, and dumps what the peer dumped; one not warmed
// predicts nothing.
func TestWarmIndex(t *testing.T) {
	h := newHarness(t)
	var ph prefix.Hasher
	root := prefix.Root("m", "", "")
	a := ph.Chain(nil, root, make([]uint32, 80), 16)  // five blocks
	b := ph.Chain(nil, root, []uint32{1, 2, 3, 4}, 1) // four others
	predict := func(pid *actor.PID, chain []prefix.Hash) int {
		t.Helper()
		return h.predict(t, pid, estimate.Query{Blocks: chain, PromptTokens: len(chain)*16 + 1, BlockSize: 16})
	}
	peerH := NewHandle("r0", "http://10.0.0.1:8000", []string{"m"}, NewCounters(0, 0))
	peer := h.spawn(peerH, Config{Health: testHealth()})
	h.send(peer, &Assign{Attempt: &Attempt{Blocks: a, Seq: peerH.Shadow().Next()}})
	h.send(peer, &Assign{Attempt: &Attempt{Blocks: b, Seq: peerH.Shadow().Next()}})
	res, err := h.sys.Root.RequestFuture(peer, &DumpIndex{}, time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	d := res.(*dump.Replica)
	if d.ID != "r0" || len(d.Blocks) != 9 || d.HasSeq {
		t.Fatalf("dump: id %q, %d blocks, has seq %v", d.ID, len(d.Blocks), d.HasSeq)
	}
	// Through the wire format, as a peer reads it.
	snap, err := dump.Decode(dump.Append(nil, &dump.Snapshot{Replicas: []dump.Replica{*d}}), 0)
	if err != nil {
		t.Fatal(err)
	}
	freshH := NewHandle("r0", "http://10.0.0.1:8000", []string{"m"}, NewCounters(0, 0))
	fresh := h.spawn(freshH, Config{Health: testHealth()})
	if got := predict(fresh, a); got != 0 {
		t.Fatalf("cold: %d tokens predicted, want 0", got)
	}
	h.send(fresh, &WarmIndex{Replica: &snap.Replicas[0]})
	for _, chain := range [][]prefix.Hash{a, b} {
		if got, want := predict(fresh, chain), predict(peer, chain); got != want || got == 0 {
			t.Fatalf("warmed: %d tokens predicted, the peer %d", got, want)
		}
	}
	again, err := h.sys.Root.RequestFuture(fresh, &DumpIndex{}, time.Second).Result()
	if err != nil {
		t.Fatal(err)
	}
	if got := again.(*dump.Replica).Blocks; !reflect.DeepEqual(got, d.Blocks) {
		t.Fatalf("the warmed replica dumps %v, the peer dumped %v", got, d.Blocks)
	}
	if blocks, _, _ := freshH.Shadow().Index(); blocks != 9 {
		t.Fatalf("published %d blocks, want 9", blocks)
	}
}

// A replica bound to its engine's event endpoint that catches up from a
// peer's snapshot subscribes again on the same address: the new
// subscription waits for the old socket to close, so it is not refused
// (and retried a second later) with the address still in use.
func TestWarmCatchUpRebindsAfterClose(t *testing.T) {
	h := newHarness(t)
	src := &fakeEvents{subs: make(chan *fakeSub, 4), exclusive: true, slowClose: 50 * time.Millisecond}
	hd := NewHandle("r0", "http://10.0.0.1:8000", []string{"m"}, NewCounters(0, 0))
	hd.SetEvents(EventStream{Endpoint: "tcp://127.0.0.1:5557", Replay: "tcp://127.0.0.1:5558", Bind: true})
	pid := h.spawn(hd, Config{Health: testHealth(), Events: src})
	first := src.next(t)
	h.send(pid, &WarmIndex{Replica: &dump.Replica{ID: "r0", Seq: 41, HasSeq: true}})
	again := src.next(t)
	if !first.isClosed() {
		t.Fatal("subscribed again while the first subscription was open")
	}
	if again.from != 42 || !again.bind {
		t.Fatalf("caught up from %d (bind %v), want 42", again.from, again.bind)
	}
	src.mu.Lock()
	refused := src.refused
	src.mu.Unlock()
	if refused != 0 {
		t.Fatalf("%d subscriptions refused with the address in use", refused)
	}
}
