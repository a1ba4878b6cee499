package requestlog

import (
	"bytes"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/VictoriaMetrics/metrics"

	"github.com/inferrail/inferrail/model/prefix"
	"github.com/inferrail/inferrail/model/tracelog"
)

func readLines(t *testing.T, path string) []tracelog.Line {
	t.Helper()
	ls, err := ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return ls
}

// chain is the chained hashes of a prompt of n engine blocks, the first
// shared of which come from a shared chain: prompts built from the same
// shared chain share their first blocks' hashes, as model/prefix hashes
// prompts with a common prefix.
func chain(seed byte, shared []prefix.Hash, n int) []prefix.Hash {
	out := append([]prefix.Hash(nil), shared[:min(len(shared), n)]...)
	var h prefix.Hasher
	parent := prefix.Root("m", "", "")
	if len(out) > 0 {
		parent = out[len(out)-1]
	}
	for len(out) < n {
		parent = h.Next(parent, []uint32{uint32(seed), uint32(len(out))})
		out = append(out, parent)
	}
	return out
}

func open(t *testing.T, o Options) (*Writer, *metrics.Set) {
	t.Helper()
	set := metrics.NewSet()
	if o.Path == "" {
		o.Path = filepath.Join(t.TempDir(), "requests.jsonl")
	}
	if o.BlockSize == 0 {
		o.BlockSize = 512
	}
	if o.SampleRate == 0 {
		o.SampleRate = 1
	}
	w, err := Open(o, set)
	if err != nil {
		t.Fatal(err)
	}
	return w, set
}

func counter(set *metrics.Set, name string) uint64 { return set.GetOrCreateCounter(name).Get() }

// A record's fields are the entry's, its hash ids one per 512 tokens, the
// last partial; two prompts with a common prefix of whole blocks share
// those ids, a new prompt gets the next unused ones, and a file's
// timestamps run from its first line's arrival.
func TestRecord(t *testing.T) {
	path := filepath.Join(t.TempDir(), "requests.jsonl")
	w, set := open(t, Options{Path: path})
	t0 := time.Date(2026, 12, 7, 22, 40, 1, 123456789, time.UTC)
	shared := chain(1, nil, 64)     // 2 request-log blocks of 32 engine blocks
	a := chain(1, shared, 12000/16) // 12,000 tokens: 23 whole blocks and a partial one
	b := chain(2, shared, 1100/16)  // shares the first 2 whole blocks with a
	c := chain(3, nil, 600/16)      // shares nothing
	e := Entry{Arrival: t0, Model: "inferrail/sim-8b", Session: 0x9f3a0c1e22b4d5a6, InputLength: 12000, OutputLength: 300,
		Policy: "cost_model", Replica: "r1", Status: 200, Predicted: 1024, HasPredicted: true, Cached: 1024, HasCached: true,
		FirstByte: 123400 * time.Microsecond, End: 4567800 * time.Microsecond}
	w.Log(1, &e, a, 16)
	e2 := Entry{Arrival: t0.Add(1500 * time.Millisecond), Model: "m", InputLength: 1100, Status: 503}
	w.Log(2, &e2, b, 16)
	e3 := Entry{Arrival: t0.Add(-20 * time.Millisecond), Model: "m", InputLength: 600, Status: 200, End: time.Millisecond}
	w.Log(3, &e3, c, 16)
	e4 := Entry{Arrival: t0.Add(time.Second), Model: "m", InputLength: 12000, Status: 200}
	w.Log(4, &e4, a, 16) // the same prompt again: the same ids
	e5 := Entry{Arrival: t0, Model: "m"}
	w.Log(5, &e5, nil, 16) // not prepared
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	ls := readLines(t, path)
	if len(ls) != 5 || counter(set, `inferrail_request_log_records_total{result="written"}`) != 5 {
		t.Fatalf("%d lines", len(ls))
	}
	l := ls[0]
	if l.Timestamp != 0 || l.InputLength != 12000 || l.OutputLength != 300 || *l.BlockSize != 512 ||
		*l.Time != "2026-12-07T22:40:01.123456789Z" || l.Model != "inferrail/sim-8b" || l.Adapter != "" ||
		*l.Session != "9f3a0c1e22b4d5a6" || l.Policy != "cost_model" || l.Replica != "r1" || l.Status != 200 ||
		*l.Predicted != 1024 || *l.Cached != 1024 || *l.TTFT != 123.4 || *l.E2E != 4567.8 {
		t.Fatalf("first line %+v", l)
	}
	if len(l.HashIDs) != 24 {
		t.Fatalf("12,000 tokens got %d ids", len(l.HashIDs))
	}
	for i, id := range l.HashIDs {
		if id != int64(i) {
			t.Fatalf("first line's ids %v: want 0..23", l.HashIDs)
		}
	}
	l = ls[1]
	if l.Timestamp != 1500 || *l.Session != "" || l.Predicted != nil || l.Cached != nil || l.TTFT != nil || l.E2E != nil ||
		len(l.HashIDs) != 3 || l.HashIDs[0] != 0 || l.HashIDs[1] != 1 || l.HashIDs[2] != 24 {
		t.Fatalf("second line %+v: want ids [0 1 24], nothing optional", l)
	}
	if l = ls[2]; l.Timestamp != -20 || len(l.HashIDs) != 2 || l.HashIDs[0] != 25 || l.HashIDs[1] != 26 || *l.TTFT != 0 || *l.E2E != 1 {
		t.Fatalf("third line %+v: want ids [25 26], timestamp -20", l)
	}
	if l = ls[3]; !slices.Equal(l.HashIDs, ls[0].HashIDs) {
		t.Fatalf("the same prompt got ids %v, then %v", ls[0].HashIDs, l.HashIDs)
	}
	if l = ls[4]; l.HashIDs == nil || len(l.HashIDs) != 0 || l.InputLength != 0 {
		t.Fatalf("an unprepared prompt: %+v", l)
	}
}

// A prompt of whole blocks has no partial id; one whose last block is
// partial shares the whole ones with the longer prompt, and differs from
// it on the last; a block size the engine's does not divide gives no ids
// and is warned about once.
func TestIdentities(t *testing.T) {
	var logs bytes.Buffer
	w, _ := open(t, Options{Log: slog.New(slog.NewTextHandler(&logs, nil))})
	defer w.Close()
	blocks := chain(1, nil, 64)
	f := func(tokens, engine int, want int) []uint64 {
		t.Helper()
		p := w.identities(blocks[:min(len(blocks), tokens/max(engine, 1))], tokens, engine)
		if p == nil {
			if want != 0 {
				t.Fatalf("%d tokens: no ids, want %d", tokens, want)
			}
			return nil
		}
		if len(*p) != want {
			t.Fatalf("%d tokens at engine blocks of %d: %d ids, want %d", tokens, engine, len(*p), want)
		}
		return *p
	}
	whole := f(1024, 16, 2)
	longer := f(1024+100, 16, 3)
	if whole[0] != longer[0] || whole[1] != longer[1] || longer[2] == whole[1] {
		t.Fatalf("ids %v and %v", whole, longer)
	}
	if other := f(1024+101, 16, 3); other[2] == longer[2] {
		t.Fatal("tails of other lengths share an id")
	}
	f(1024, 0, 2) // 0 is vLLM's 16
	f(5, 16, 1)
	f(0, 16, 0)
	f(1024, 48, 0)
	f(1024, 48, 0)
	if n := strings.Count(logs.String(), "not a multiple"); n != 1 {
		t.Fatalf("warned %d times: %s", n, logs.String())
	}
}

// Requests are sampled by their policy key, the conversation's when they
// name one: the same key always gets the same answer, at the rate.
func TestSampled(t *testing.T) {
	for _, rate := range []float64{0.01, 0.1, 0.5, 1} {
		w, set := open(t, Options{SampleRate: rate})
		const n = 100_000
		kept := 0
		for i := range uint64(n) {
			key := i * 0x9e3779b97f4a7c15
			if s := w.Sampled(key); s != w.Sampled(key) {
				t.Fatalf("rate %v: key %d sampled differently twice", rate, key)
			} else if s {
				kept++
			}
		}
		got, sd := float64(kept)/n, 5*math.Sqrt(rate*(1-rate)/n)
		if got < rate-sd || got > rate+sd {
			t.Errorf("rate %v: sampled %v of keys", rate, got)
		}
		var e Entry
		for i := range uint64(1000) {
			w.Log(i, &e, nil, 16)
		}
		w.Close()
		written, out := counter(set, `inferrail_request_log_records_total{result="written"}`),
			counter(set, `inferrail_request_log_records_total{result="sampled_out"}`)
		if written+out != 1000 || (rate == 1) != (out == 0) {
			t.Errorf("rate %v: %d written, %d sampled out of 1000", rate, written, out)
		}
	}
	var none *Writer
	if none.Sampled(1) || none.Close() != nil {
		t.Fatal("a nil Writer samples or fails")
	}
	none.Log(1, &Entry{}, nil, 16)
	set := metrics.NewSet()
	if _, err := Open(Options{Path: filepath.Join(t.TempDir(), "r"), SampleRate: 1.5, BlockSize: 512}, set); err == nil {
		t.Fatal("a sample rate of 1.5 was accepted")
	}
}

// A path the gateway cannot write is refused at Open and by CheckPath,
// naming the key; CheckPath leaves no file behind.
func TestUnwritablePath(t *testing.T) {
	dir := t.TempDir()
	for _, p := range []string{filepath.Join(dir, "no", "such", "dir", "r.jsonl"), dir} {
		if _, err := Open(Options{Path: p, SampleRate: 1, BlockSize: 512}, metrics.NewSet()); err == nil ||
			!strings.Contains(err.Error(), "observability.request_log.path") {
			t.Fatalf("Open(%s): %v", p, err)
		}
		if err := CheckPath(p); err == nil || !strings.Contains(err.Error(), "observability.request_log.path") {
			t.Fatalf("CheckPath(%s): %v", p, err)
		}
	}
	ok := filepath.Join(dir, "r.jsonl")
	if err := CheckPath(ok); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(ok); !os.IsNotExist(err) {
		t.Fatalf("CheckPath left a file: %v", err)
	}
}

// A write that fails (a full disk: /dev/full) is warned about once, naming
// the path and the cause, and every record that failed is counted; the
// writer keeps taking records.
func TestWriteFails(t *testing.T) {
	if _, err := os.Stat("/dev/full"); err != nil {
		t.Skip("no /dev/full")
	}
	var logs bytes.Buffer
	w, set := open(t, Options{Path: "/dev/full", Log: slog.New(slog.NewTextHandler(&logs, nil))})
	e := Entry{Model: "m", Status: 200}
	for i := range uint64(50) {
		w.Log(i, &e, chain(1, nil, 40), 16)
		if i%10 == 0 {
			time.Sleep(time.Millisecond) // several writes, not one
		}
	}
	if err := w.Close(); err == nil {
		t.Fatal("Close reports no error")
	}
	if failed := counter(set, `inferrail_request_log_records_total{result="failed"}`); failed != 50 {
		t.Fatalf("%d failed, want 50", failed)
	}
	out := logs.String()
	if n := strings.Count(out, "cannot write"); n != 1 || !strings.Contains(out, "/dev/full") || !strings.Contains(out, "no space left") {
		t.Fatalf("warned %d times: %s", n, out)
	}
}

// When the disk falls behind, records are dropped and counted, and Log
// never waits: a FIFO nobody reads stands for a disk that stopped.
func TestDropsUnderPressure(t *testing.T) {
	path := filepath.Join(t.TempDir(), "fifo")
	if err := syscall.Mkfifo(path, 0o600); err != nil {
		t.Skip("no FIFO:", err)
	}
	rd, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	w, set := open(t, Options{Path: path})
	const n = 20_000
	e := Entry{Model: "m", Status: 200, InputLength: 12000}
	blocks := chain(1, nil, 750)
	for i := range uint64(n) {
		w.Log(i, &e, blocks, 16)
	}
	dropped := counter(set, `inferrail_request_log_records_total{result="dropped"}`)
	// Read the FIFO again so that Close can drain what was queued.
	got := make(chan int64)
	go func() {
		syscall.SetNonblock(int(rd.Fd()), false)
		m, _ := io.Copy(io.Discard, rd)
		got <- m
	}()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	<-got
	written := counter(set, `inferrail_request_log_records_total{result="written"}`)
	// The pipe holds 64 KiB, the queue QueueLen records and the writer
	// at most two batches of 64 KiB: the rest must have been dropped.
	if dropped < n-QueueLen-2000 || written+dropped != n {
		t.Fatalf("%d dropped, %d written of %d", dropped, written, n)
	}
}

// A gateway started again on the same path moves the last run's file
// aside rather than append a second numbering to it.
func TestReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.jsonl")
	for i := range 2 {
		w, _ := open(t, Options{Path: path, MaxFiles: 2})
		e := Entry{Arrival: time.Now(), Model: "m", InputLength: 1024, Status: 200}
		w.Log(uint64(i), &e, chain(byte(i), nil, 64), 16)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	old, cur := readLines(t, path+".1"), readLines(t, path)
	if len(old) != 1 || len(cur) != 1 || !slices.Equal(cur[0].HashIDs, []int64{0, 1}) || !slices.Equal(old[0].HashIDs, []int64{0, 1}) {
		t.Fatalf("the last run's file %+v, this run's %+v", old, cur)
	}
}

// A file that reaches max_bytes moves aside, keeping max_files files in
// all; a file whose numbering is full starts a new one with ids from 0;
// both are counted, and every file's first line is timestamp 0.
func TestRotation(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "r.jsonl")
	w, set := open(t, Options{Path: path, MaxBytes: 4096, MaxFiles: 3})
	t0 := time.Now()
	for i := range 200 {
		e := Entry{Arrival: t0.Add(time.Duration(i) * time.Second), Model: "m", InputLength: 2048, Status: 200}
		w.Log(uint64(i), &e, chain(byte(i), nil, 128), 16)
	}
	w.Close()
	for _, p := range []string{path, path + ".1", path + ".2"} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() > 4096+1024 {
			t.Fatalf("%s holds %d bytes", p, st.Size())
		}
		if ls := readLines(t, p); len(ls) == 0 || ls[0].Timestamp != 0 || ls[0].HashIDs[0] != 0 {
			t.Fatalf("%s starts %+v", p, ls)
		}
	}
	if _, err := os.Stat(path + ".3"); !os.IsNotExist(err) {
		t.Fatalf("a fourth file: %v", err)
	}
	if counter(set, `inferrail_request_log_rotations_total{reason="size"}`) < 3 {
		t.Fatalf("%d size rotations counted", counter(set, `inferrail_request_log_rotations_total{reason="size"}`))
	}

	path = filepath.Join(dir, "ids.jsonl")
	w, set = open(t, Options{Path: path, MaxIDs: 10, MaxFiles: 2})
	shared := chain(9, nil, 128)
	for i := range 3 {
		e := Entry{Arrival: t0.Add(time.Duration(i) * time.Second), Model: "m", InputLength: 2048, Status: 200}
		w.Log(uint64(i), &e, shared, 16) // the same 4 ids thrice
	}
	e := Entry{Arrival: t0.Add(5 * time.Second), Model: "m", InputLength: 2048, Status: 200}
	w.Log(7, &e, chain(7, nil, 128), 16) // 4 more: 8 ids
	w.Log(8, &e, chain(8, nil, 128), 16) // 12 would not fit
	w.Close()
	old, cur := readLines(t, path+".1"), readLines(t, path)
	if len(old) != 4 || len(cur) != 1 || !slices.Equal(cur[0].HashIDs, []int64{0, 1, 2, 3}) || cur[0].Timestamp != 0 ||
		!slices.Equal(old[3].HashIDs, []int64{4, 5, 6, 7}) {
		t.Fatalf("before the numbering filled %+v, after %+v", old, cur)
	}
	if counter(set, `inferrail_request_log_rotations_total{reason="ids"}`) != 1 {
		t.Fatal("the rotation on a full numbering was not counted")
	}
}
