package dump

import (
	"bytes"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/inferrail/inferrail/model/estimate"
	"github.com/inferrail/inferrail/model/prefix"
)

func sample() *Snapshot {
	return &Snapshot{Replicas: []Replica{
		{ID: "r0", Seq: 41, HasSeq: true,
			Blocks: []prefix.Hash{{Hi: 1, Lo: 2}, {Hi: 3, Lo: 4}},
			Engine: []estimate.EngineBlock{
				{Rank: 0, Hash: 7, Block: prefix.Hash{Hi: 1, Lo: 2}, Copies: 1},
				{Rank: 1, Hash: 8, Block: prefix.Hash{Hi: 3, Lo: 4}, Parent: 7, HasParent: true, Copies: 2},
				{Rank: 1, Hash: 9, Parent: 8, HasParent: true, Copies: 1}, // not rebuilt
			}},
		{ID: "sglang-1"},
	}}
}

func TestRoundTrip(t *testing.T) {
	f := func(s *Snapshot) {
		t.Helper()
		b := Append(nil, s)
		got, err := Decode(b, 0)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, s) {
			t.Fatalf("decoded %+v, want %+v", got, s)
		}
		if again := Append(nil, got); !bytes.Equal(again, b) {
			t.Fatal("a decoded snapshot encodes to other bytes")
		}
	}
	f(sample())
	f(&Snapshot{Replicas: []Replica{}})
}

func TestDecodeRejects(t *testing.T) {
	good := Append(nil, sample())
	f := func(name string, b []byte, max int, want string) {
		t.Helper()
		_, err := Decode(b, max)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: error %v, want one saying %q", name, err, want)
		}
	}
	f("empty", nil, 0, "not an index snapshot")
	f("other magic", append([]byte("JSON"), good[4:]...), 0, "not an index snapshot")
	v2 := bytes.Clone(good)
	v2[4] = 2
	f("version", v2, 0, "version 2, want 1")
	flipped := bytes.Clone(good)
	flipped[10] ^= 0xff
	f("checksum", flipped, 0, "checksum mismatch")
	f("truncated", good[:len(good)-3], 0, "checksum mismatch")
	_, err := Decode(good, len(good)-1)
	if !errors.Is(err, ErrTooLarge) {
		t.Errorf("over the bound: %v, want ErrTooLarge", err)
	}
	dup := Append(nil, &Snapshot{Replicas: []Replica{{ID: "a"}, {ID: "a"}}})
	f("duplicate id", dup, 0, `replica "a": listed twice`)
	copies := Append(nil, &Snapshot{Replicas: []Replica{{ID: "a", Engine: []estimate.EngineBlock{{Copies: 0}}}}})
	f("no copies", copies, 0, "0 copies")
	// A count far beyond the bytes: sealed with a good checksum, so the
	// count check is what refuses it before allocating.
	huge := sealed(append([]byte(magic+"\x01"), 0xff, 0xff, 0xff, 0xff, 0x0f))
	f("huge count", huge, 0, "more than the")
	f("long number", sealed([]byte(magic+"\x01\x80\x00")), 0, "shortest form")
	trailing := sealed(append(bytes.Clone(good[:len(good)-8]), 0))
	f("trailing bytes", trailing, 0, "1 bytes after the last replica")
}

// sealed appends the checksum to body, so that a check past it is the one
// that fails.
func sealed(body []byte) []byte { return appendSum(body) }
