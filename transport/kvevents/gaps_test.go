package kvevents

import (
	"context"
	"encoding/binary"
	"errors"
	"testing"
	"time"

	"github.com/go-zeromq/zmq4"

	"github.com/inferrail/inferrail/model/kvevent"
)

// fakeEngine is a hand-driven engine: a raw PUB whose sequence numbers the
// test chooses and a replay ROUTER serving a fixed buffer, for gap tests.
type fakeEngine struct {
	pub      zmq4.Socket // owned by the test goroutine
	endpoint string
	replay   string
	cancel   context.CancelFunc
	done     chan struct{}
}

func newFakeEngine(t *testing.T, buffer map[uint64][]byte) *fakeEngine {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	e := &fakeEngine{cancel: cancel, done: make(chan struct{})}
	e.pub = zmq4.NewPub(ctx)
	if err := e.pub.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	e.endpoint = boundEndpoint("tcp://127.0.0.1:0", e.pub.Addr())
	router := zmq4.NewRouter(ctx)
	if err := router.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	e.replay = boundEndpoint("tcp://127.0.0.1:0", router.Addr())
	go func() { // owns router
		defer close(e.done)
		defer closeDrain(router)
		for {
			msg, err := router.Recv()
			if err != nil {
				return
			}
			id, start := msg.Frames[0], binary.BigEndian.Uint64(msg.Frames[2])
			for seq := start; seq < start+100; seq++ {
				if p, ok := buffer[seq]; ok {
					_ = router.Send(zmq4.NewMsgFrom(id, nil, []byte("kv@"), binary.BigEndian.AppendUint64(nil, seq), p))
				}
			}
			_ = router.Send(zmq4.NewMsgFrom(id, nil, nil, endSeq, nil))
		}
	}()
	t.Cleanup(func() {
		_ = e.pub.Close()
		cancel()
		<-e.done
	})
	return e
}

func (e *fakeEngine) send(t *testing.T, seq uint64, payload []byte) {
	t.Helper()
	e.sendTopic(t, "kv@", seq, payload)
}

func (e *fakeEngine) sendTopic(t *testing.T, topic string, seq uint64, payload []byte) {
	t.Helper()
	if err := e.pub.Send(zmq4.NewMsgFrom([]byte(topic), binary.BigEndian.AppendUint64(nil, seq), payload)); err != nil {
		t.Fatal(err)
	}
}

// waitSubscribed waits until the PUB has a subscription, which zmq4 exposes.
func (e *fakeEngine) waitSubscribed(t *testing.T) {
	t.Helper()
	deadline := time.Now().Add(testDeadline)
	for len(e.pub.(zmq4.Topics).Topics()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no subscription")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func payloadOf(i int) []byte {
	return kvevent.AppendBatch(nil, withRank(testBatch(i), 0), kvevent.EncodingMap)
}

func TestSubscriberGaps(t *testing.T) {
	buffer := map[uint64][]byte{}
	for _, seq := range []uint64{3, 4, 5, 6, 9, 10} {
		buffer[seq] = payloadOf(int(seq))
	}
	e := newFakeEngine(t, buffer)
	s := newSink()
	scfg := s.config(e.endpoint)
	scfg.ReplayEndpoint = e.replay
	sub := newSubscriber(t, scfg)
	e.waitSubscribed(t)

	expect := func(seq uint64, replayed bool) {
		t.Helper()
		d := s.next(t)
		if d.Seq != seq || d.Replayed != replayed || d.Batch.TS != float64(seq) {
			t.Fatalf("got seq %d replayed %v TS %v, want seq %d replayed %v", d.Seq, d.Replayed, d.Batch.TS, seq, replayed)
		}
	}
	for seq := range uint64(3) {
		e.send(t, seq, payloadOf(int(seq)))
		expect(seq, false)
	}
	// 3 and 4 lost; replay brings 3..6, so live 5 and 6 are duplicates.
	e.send(t, 5, payloadOf(5))
	for seq := uint64(3); seq <= 6; seq++ {
		expect(seq, true)
	}
	e.send(t, 6, payloadOf(6))
	e.send(t, 7, payloadOf(7))
	expect(7, false)
	// 8 lost and no longer buffered: a gap, then 10 live (9, 10 replayed
	// are not delivered past the hole).
	e.send(t, 10, payloadOf(10))
	if g := s.nextGap(t); g != (Gap{From: 8, To: 10}) {
		t.Fatalf("gap %+v", g)
	}
	expect(10, false)
	// An undecodable batch is a gap of one.
	e.send(t, 11, []byte{0xc1})
	if g := s.nextGap(t); g != (Gap{From: 11, To: 12}) {
		t.Fatalf("gap %+v", g)
	}
	// The engine restarts.
	e.send(t, 0, payloadOf(0))
	if g := s.nextGap(t); g != (Gap{From: 12, To: 0, Restart: true}) {
		t.Fatalf("gap %+v", g)
	}
	expect(0, false)
	// A message of the wrong shape is counted and skipped.
	if err := e.pub.Send(zmq4.NewMsgFrom([]byte("kv@"), []byte{1})); err != nil {
		t.Fatal(err)
	}
	e.send(t, 1, payloadOf(1))
	expect(1, false)
	st := sub.Stats()
	want := SubscriberStats{Received: 10, Delivered: 11, Replayed: 4, Duplicates: 2, Gaps: 3, Restarts: 1,
		Malformed: 1, DecodeErrors: 1}
	if st != want {
		t.Fatalf("stats\n got %+v\nwant %+v", st, want)
	}
}

func TestReplayBadReply(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
	defer cancel()
	router := zmq4.NewRouter(ctx)
	if err := router.Listen("tcp://127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	ep := boundEndpoint("tcp://127.0.0.1:0", router.Addr())
	done := make(chan struct{})
	go func() { // owns router
		defer close(done)
		defer closeDrain(router)
		msg, err := router.Recv()
		if err != nil {
			return
		}
		_ = router.Send(zmq4.NewMsgFrom(msg.Frames[0], nil, []byte{1, 2}))
		<-ctx.Done()
	}()
	err := Replay(ctx, ep, 0, func(uint64, []byte) error { return nil })
	if !errors.Is(err, ErrBadReply) {
		t.Fatalf("err %v, want ErrBadReply", err)
	}
	cancel()
	<-done
}
