package kvevent

import (
	"bytes"
	"encoding/hex"
	"errors"
	"math"
	"math/rand/v2"
	"runtime"
	"strings"
	"testing"
)

func TestWriterForms(t *testing.T) {
	f := func(got []byte, want string) {
		t.Helper()
		if h := hex.EncodeToString(got); h != want {
			t.Fatalf("got %s, want %s", h, want)
		}
	}
	f(appendUint(nil, 0), "00")
	f(appendUint(nil, 127), "7f")
	f(appendUint(nil, 128), "cc80")
	f(appendUint(nil, 256), "cd0100")
	f(appendUint(nil, 65536), "ce00010000")
	f(appendUint(nil, 1<<32), "cf0000000100000000")
	f(appendInt(nil, -1), "ff")
	f(appendInt(nil, -32), "e0")
	f(appendInt(nil, -33), "d0df")
	f(appendInt(nil, -129), "d1ff7f")
	f(appendInt(nil, -32769), "d2ffff7fff")
	f(appendInt(nil, math.MinInt64), "d38000000000000000")
	f(appendFloat64(nil, 1.5), "cb3ff8000000000000")
	f(appendStr(nil, ""), "a0")
	f(appendStr(nil, strings.Repeat("a", 32))[:2], "d920")
	f(appendStr(nil, strings.Repeat("a", 256))[:3], "da0100")
	f(appendStr(nil, strings.Repeat("a", 65536))[:5], "db00010000")
	f(appendArrayLen(nil, 15), "9f")
	f(appendArrayLen(nil, 16), "dc0010")
	f(appendArrayLen(nil, 65536), "dd00010000")
	f(appendMapLen(nil, 15), "8f")
	f(appendMapLen(nil, 16), "de0010")
	f(appendMapLen(nil, 65536), "df00010000")
}

// randBatch draws a batch that uses every field, every integer width and
// both nil and set optionals.
func randBatch(r *rand.Rand) *Batch {
	u64 := func() uint64 {
		switch r.IntN(4) {
		case 0:
			return r.Uint64N(200)
		case 1:
			return r.Uint64N(1 << 20)
		default:
			return r.Uint64()
		}
	}
	optInt := func() *int {
		if r.IntN(2) == 0 {
			return nil
		}
		v := int(int64(u64()) >> r.IntN(64))
		return &v
	}
	optStr := func() *string {
		if r.IntN(2) == 0 {
			return nil
		}
		s := strings.Repeat("x", r.IntN(300))
		return &s
	}
	b := &Batch{TS: r.NormFloat64() * 1e9, DPRank: optInt()}
	for range r.IntN(6) {
		switch r.IntN(3) {
		case 0:
			s := &BlockStored{BlockSize: 1 + r.IntN(64), LoraID: optInt(), LoraName: optStr(),
				GroupIdx: optInt(), KVCacheSpecKind: optStr(), KVCacheSpecSlidingWindow: optInt(),
				Locality: optStr(), Ownership: optStr(), SessionID: optStr()}
			if r.IntN(2) == 0 {
				s.Medium = "GPU"
			}
			if r.IntN(2) == 0 {
				p := u64()
				s.ParentBlockHash = &p
			}
			for range r.IntN(20) {
				s.BlockHashes = append(s.BlockHashes, u64())
			}
			for range r.IntN(70) {
				s.TokenIDs = append(s.TokenIDs, uint32(u64()))
			}
			if r.IntN(2) == 0 {
				s.ExtraKeys = Raw{0x92, 0xc0, 0x91, 0xa1, 'k'} // [nil, ["k"]]
			}
			b.Events = append(b.Events, s)
		case 1:
			e := &BlockRemoved{Medium: "CPU", GroupIdx: optInt(), Locality: optStr(), Ownership: optStr()}
			for range 1 + r.IntN(3) {
				e.BlockHashes = append(e.BlockHashes, u64())
			}
			b.Events = append(b.Events, e)
		default:
			b.Events = append(b.Events, &AllBlocksCleared{})
		}
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, enc := range []Encoding{EncodingMap, EncodingArray} {
		for i := range 2000 {
			want := randBatch(r)
			data := AppendBatch(nil, want, enc)
			got, err := DecodeBatch(data)
			if err != nil {
				t.Fatalf("enc %d #%d: %v\n%x", enc, i, err, data)
			}
			if !equalBatch(got, want) {
				t.Fatalf("enc %d #%d:\n got %s\nwant %s", enc, i, dump(got), dump(want))
			}
			// Encoding is deterministic and appends.
			again := AppendBatch([]byte("prefix"), got, enc)
			if !bytes.Equal(again[6:], data) || string(again[:6]) != "prefix" {
				t.Fatalf("enc %d #%d: re-encoding differs", enc, i)
			}
		}
	}
}

func TestTrailingDefaults(t *testing.T) {
	// Legacy arrays drop only trailing defaults; maps drop defaults anywhere.
	sess := "s"
	e := &BlockStored{BlockHashes: []uint64{1}, TokenIDs: []uint32{1}, BlockSize: 1, Medium: "GPU", SessionID: &sess}
	b := &Batch{TS: 1, Events: []Event{e}}
	arr, _ := eventLen(t, AppendBatch(nil, b, EncodingArray))
	if arr != 1+14 {
		t.Fatalf("array event has %d elements, want 15", arr)
	}
	m, _ := eventLen(t, AppendBatch(nil, b, EncodingMap))
	if m != 1+7+1 {
		t.Fatalf("map event has %d entries, want 9", m)
	}
	e.SessionID = nil
	arr, _ = eventLen(t, AppendBatch(nil, b, EncodingArray))
	if arr != 8 {
		t.Fatalf("array event has %d elements, want 8", arr)
	}
}

// eventLen returns the element count of the first event's container.
func eventLen(t *testing.T, data []byte) (int, bool) {
	t.Helper()
	r := &reader{b: data}
	if _, err := r.arrayLen(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.float(); err != nil {
		t.Fatal(err)
	}
	if _, err := r.arrayLen(); err != nil {
		t.Fatal(err)
	}
	c, _ := r.peek()
	if c&0xf0 == 0x80 {
		n, err := r.mapLen()
		if err != nil {
			t.Fatal(err)
		}
		return n, true
	}
	n, err := r.arrayLen()
	if err != nil {
		t.Fatal(err)
	}
	return n, false
}

func TestDecodeBatchErrors(t *testing.T) {
	f := func(hexIn string, want error) {
		t.Helper()
		data, err := hex.DecodeString(strings.ReplaceAll(hexIn, " ", ""))
		if err != nil {
			t.Fatal(err)
		}
		b, err := DecodeBatch(data)
		if !errors.Is(err, want) {
			t.Fatalf("%s: got (%v, %v), want %v", hexIn, b, err, want)
		}
	}
	f("", ErrMalformed)
	f("c0", ErrMalformed)                                     // nil batch
	f("91 cb3ff8000000000000", ErrMalformed)                  // one field
	f("92 cb3ff8000000000000 90 00", ErrMalformed)            // trailing byte
	f("92 a1 61 90", ErrMalformed)                            // str timestamp
	f("92 00 dd ffffffff", ErrMalformed)                      // array32 claiming 4G events
	f("92 00 dc ffff 90", ErrMalformed)                       // array16 longer than input
	f("92 00 91 90", ErrMalformed)                            // empty event array
	f("92 00 91 c0", ErrMalformed)                            // nil event
	f("92 00 91 91 a3 466f6f", ErrUnknownEvent)               // ["Foo"]
	f("92 00 91 81 a4 74797065 a3 466f6f", ErrUnknownEvent)   // {"type": "Foo"}
	f("92 00 91 81 a1 61 00", ErrMalformed)                   // map without type
	f("92 00 91 82 a1 61 c1 a4 74797065 a1 61", ErrMalformed) // reserved 0xc1 skipped
	f("92 00 91 81 00 00", ErrMalformed)                      // int map key
	// BlockStored with a negative token id and one beyond uint32.
	f("92 00 91 94 ab 426c6f636b53746f726564 90 c0 91 ff", ErrMalformed)
	f("92 00 91 94 ab 426c6f636b53746f726564 90 c0 91 cf 0000000100000000", ErrMalformed)
	// block_size beyond int64.
	f("92 00 91 95 ab 426c6f636b53746f726564 90 c0 90 cf ffffffffffffffff", ErrMalformed)
	// str hash.
	f("92 00 91 92 ac 426c6f636b52656d6f766564 91 a1 61", ErrMalformed)
	// ext claiming more than the input, inside an unknown field.
	f("92 00 91 92 b0 416c6c426c6f636b73436c6561726564 c9 7fffffff 01", ErrMalformed)
	// nested arrays claiming more values than bytes.
	f("92 00 91 92 b0 416c6c426c6f636b73436c6561726564 9f 9f 9f", ErrMalformed)
}

func TestDecodeBatchAllocationBound(t *testing.T) {
	// A 16-byte input claiming 2^32-1 of everything must not allocate for
	// them: lengths are checked against the bytes left.
	inputs := [][]byte{
		{0x92, 0x00, 0xdd, 0xff, 0xff, 0xff, 0xff, 0x00},
		{0x92, 0x00, 0x91, 0x92, 0xac, 'B', 'l', 'o', 'c', 'k', 'R', 'e', 'm', 'o', 'v', 'e', 'd', 0xdd, 0xff, 0xff, 0xff, 0xff},
		{0x92, 0x00, 0x91, 0x81, 0xc6, 0xff, 0xff, 0xff, 0xff},
		{0x92, 0x00, 0x91, 0xdf, 0xff, 0xff, 0xff, 0xff},
	}
	for _, in := range inputs {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for range 10 {
			if _, err := DecodeBatch(in); err == nil {
				t.Fatalf("%x decoded", in)
			}
		}
		runtime.ReadMemStats(&after)
		if per := (after.TotalAlloc - before.TotalAlloc) / 10; per > 4096 {
			t.Fatalf("%x: %d bytes allocated per decode", in, per)
		}
	}
}

func TestDecodeDeepNesting(t *testing.T) {
	// Skipping a deeply nested unknown field neither recurses nor fails.
	var data []byte
	data = append(data, 0x92, 0x00, 0x91, 0x92)
	data = appendStr(data, tagAllBlocksCleared)
	for range 1 << 16 {
		data = append(data, 0x91)
	}
	data = append(data, 0xc0)
	b, err := DecodeBatch(data)
	if err != nil || len(b.Events) != 1 {
		t.Fatalf("got %v, %v", b, err)
	}
}

func TestAppendBatchUnknownEncodingPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.HasPrefix(r.(string), "BUG: ") {
			t.Fatalf("recover() = %v", r)
		}
	}()
	AppendBatch(nil, &Batch{}, Encoding(7))
}

func FuzzDecodeBatch(f *testing.F) {
	for _, fx := range loadFixtures(f) {
		f.Add(fx.bytes(f))
	}
	r := rand.New(rand.NewPCG(3, 4))
	for range 8 {
		b := randBatch(r)
		f.Add(AppendBatch(nil, b, EncodingMap))
		f.Add(AppendBatch(nil, b, EncodingArray))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := DecodeBatch(data)
		if failed(t, b, err) {
			return
		}
		for _, enc := range []Encoding{EncodingMap, EncodingArray} {
			out := AppendBatch(nil, b, enc)
			again, err := DecodeBatch(out)
			if err != nil {
				t.Fatalf("enc %d: re-decode: %v\n%x", enc, err, out)
			}
			if !equalBatch(again, b) {
				t.Fatalf("enc %d:\n got %s\nwant %s", enc, dump(again), dump(b))
			}
		}
	})
}

// failed reports whether a decode failed, and fails t unless it failed
// cleanly: no batch, and an error wrapping ErrMalformed or ErrUnknownEvent.
func failed(t *testing.T, b *Batch, err error) bool {
	t.Helper()
	if err == nil {
		return false
	}
	if b != nil {
		t.Fatal("batch and error")
	}
	if !errors.Is(err, ErrMalformed) && !errors.Is(err, ErrUnknownEvent) {
		t.Fatalf("unclassified error %v", err)
	}
	return true
}

func BenchmarkAppendBatch(b *testing.B) {
	batch := benchBatch()
	buf := make([]byte, 0, 4096)
	b.ReportAllocs()
	for b.Loop() {
		buf = AppendBatch(buf[:0], batch, EncodingMap)
	}
	Sink = buf
}

func BenchmarkDecodeBatch(b *testing.B) {
	data := AppendBatch(nil, benchBatch(), EncodingMap)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		batch, err := DecodeBatch(data)
		if err != nil {
			b.Fatal(err)
		}
		Sink = batch
	}
}

// Sink keeps benchmark results alive.
var Sink any

// benchBatch is a typical prefill step: 32 blocks of 16 tokens stored, one
// eviction.
func benchBatch() *Batch {
	s := &BlockStored{BlockSize: 16, Medium: "GPU"}
	for i := range 32 {
		s.BlockHashes = append(s.BlockHashes, uint64(i)*0x9e3779b97f4a7c15)
	}
	for i := range 32 * 16 {
		s.TokenIDs = append(s.TokenIDs, uint32(i*7919%151000))
	}
	zero := 0
	kind := "full_attention"
	s.GroupIdx, s.KVCacheSpecKind = &zero, &kind
	return &Batch{TS: 1789095808.8378847, DPRank: &zero, Events: []Event{s, &BlockRemoved{BlockHashes: []uint64{7}, Medium: "GPU"}}}
}
