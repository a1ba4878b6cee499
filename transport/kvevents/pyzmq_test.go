package kvevents

import (
	"bufio"
	"context"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/inferrail/inferrail/model/kvevent"
)

// python returns an interpreter with pyzmq and msgpack (Debian's
// python3-zmq and python3-msgpack), or skips the test.
func python(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("interop with pyzmq skipped in -short mode")
	}
	for _, c := range []string{"python3", "/usr/bin/python3"} {
		path, err := exec.LookPath(c)
		if err != nil {
			continue
		}
		if exec.Command(path, "-c", "import zmq, msgpack").Run() == nil {
			return path
		}
	}
	t.Skip("no python3 with the zmq and msgpack modules")
	return ""
}

// pySub receives n batches with pyzmq, decodes them with msgpack-python and
// reports each re-encoded: identical bytes mean python read exactly what
// vLLM's msgspec would have written.
const pySub = `
import json, sys, zmq, msgpack
ep, topic, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
ctx = zmq.Context()
s = ctx.socket(zmq.SUB)
s.setsockopt(zmq.SUBSCRIBE, topic.encode())
s.setsockopt(zmq.RCVTIMEO, 10000)
s.connect(ep)
out = []
while len(out) < n:
    t, seq, payload = s.recv_multipart()
    b = msgpack.unpackb(payload)
    ev = b[1][0]
    out.append({"topic": t.decode(), "seq": int.from_bytes(seq, "big"), "ts": b[0],
                "first_key": next(iter(ev)) if isinstance(ev, dict) else None,
                "repack": msgpack.packb(b, use_bin_type=True).hex()})
print(json.dumps(out), flush=True)
s.close(linger=0)
ctx.term()
`

func TestPyzmqSubscriber(t *testing.T) {
	py := python(t)
	p := newPublisher(t, testConfig(), Options{Bind: true})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	const n = 5
	cmd := exec.CommandContext(ctx, py, "-c", pySub, p.Endpoint(), "kv@", strconv.Itoa(n))
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// Publish until python has its n batches: the slow joiner drops the
	// first ones.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	seq := 0
wait:
	for {
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("python: %v\n%s", err, stderr.String())
			}
			break wait
		case <-tick.C:
			if !p.Publish(testBatch(seq)) {
				t.Fatal("dropped")
			}
			seq++
		}
	}
	var got []struct {
		Topic    string  `json:"topic"`
		Seq      uint64  `json:"seq"`
		TS       float64 `json:"ts"`
		FirstKey string  `json:"first_key"`
		Repack   string  `json:"repack"`
	}
	if err := json.Unmarshal([]byte(stdout.String()), &got); err != nil || len(got) != n {
		t.Fatalf("python output %q: %v", stdout.String(), err)
	}
	for i, g := range got {
		want := kvevent.AppendBatch(nil, withRank(testBatch(int(g.Seq)), 0), kvevent.EncodingMap)
		if g.Topic != "kv@test" || g.TS != float64(g.Seq) || g.FirstKey != "type" ||
			g.Repack != hex.EncodeToString(want) || i > 0 && g.Seq != got[i-1].Seq+1 {
			t.Fatalf("batch %d: %+v\nwant repack %x", i, g, want)
		}
	}
}

// pyPub is vLLM's ZmqEventPublisher in miniature (after PR #45177): PUB
// [topic, seq, payload], ROUTER replay with the topic frame and the end
// marker, 5 batches published before anyone listens, then one every 10 ms
// until stdin closes.
const pyPub = `
import sys, time, zmq, msgpack
ctx = zmq.Context()
pub = ctx.socket(zmq.PUB)
pport = pub.bind_to_random_port("tcp://127.0.0.1")
router = ctx.socket(zmq.ROUTER)
rport = router.bind_to_random_port("tcp://127.0.0.1")
topic = b"kv@py"
END = (-1).to_bytes(8, "big", signed=True)
buf = []
def publish(seq):
    p = msgpack.packb([float(seq), [{"type": "BlockStored", "block_hashes": [seq + 2**63],
        "parent_block_hash": None, "token_ids": list(range(16)), "block_size": 16, "lora_id": None,
        "medium": "GPU", "lora_name": None, "group_idx": 0}], 0], use_bin_type=True)
    pub.send_multipart((topic, seq.to_bytes(8, "big"), p))
    buf.append((seq, p))
seq = 0
for _ in range(5):
    publish(seq); seq += 1
print(pport, rport, flush=True)  # only now can anyone subscribe
poller = zmq.Poller()
poller.register(router, zmq.POLLIN)
poller.register(sys.stdin.fileno(), zmq.POLLIN)
deadline = time.time() + 15
while time.time() < deadline:
    events = dict(poller.poll(10))
    if router in events:
        frames = router.recv_multipart()
        if len(frames) == 3:
            ident, _, start = frames
            start = int.from_bytes(start, "big")
            for s, p in buf:
                if s >= start:
                    router.send_multipart((ident, b"", topic, s.to_bytes(8, "big"), p))
            router.send_multipart((ident, b"", b"", END, b""))
    if sys.stdin.fileno() in events:
        break
    publish(seq); seq += 1
pub.close(linger=0)
router.close(linger=0)
ctx.term()
`

func TestPyzmqPublisher(t *testing.T) {
	py := python(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, py, "-c", pyPub)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = stdin.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("python: %v\n%s", err, stderr.String())
		}
	}()
	var pport, rport int
	line, err := bufio.NewReader(stdout).ReadString('\n')
	if _, err2 := fmt.Sscan(line, &pport, &rport); err != nil || err2 != nil {
		t.Fatalf("python said %q: %v %v\n%s", line, err, err2, stderr.String())
	}
	s := newSink()
	scfg := s.config(fmt.Sprintf("tcp://127.0.0.1:%d", pport))
	scfg.ReplayEndpoint = fmt.Sprintf("tcp://127.0.0.1:%d", rport)
	scfg.CatchUp = true
	sub := newSubscriber(t, scfg)
	// History comes by replay from seq 0, then the live stream, gap-free.
	live := 0
	for want := uint64(0); live < 5; want++ {
		d := s.next(t)
		st, ok := d.Batch.Events[0].(*kvevent.BlockStored)
		if d.Seq != want || d.Batch.TS != float64(want) || !ok || st.BlockHashes[0] != want+1<<63 ||
			*st.GroupIdx != 0 || len(st.TokenIDs) != 16 {
			t.Fatalf("delivery %+v (event %+v), want seq %d", d, d.Batch.Events[0], want)
		}
		if want < 5 && !d.Replayed {
			t.Fatalf("history batch %d not replayed", want)
		}
		if !d.Replayed {
			live++
		}
	}
	_ = sub.Close()
	if st := sub.Stats(); st.Gaps != 0 || st.ReplayErrors != 0 || st.Replayed < 5 {
		t.Fatalf("stats %+v", st)
	}
}
