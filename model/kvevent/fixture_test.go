package kvevent

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// fixture is one testdata/*.json file written by scripts/gen-kvevent-fixtures.py:
// bytes as vLLM's msgspec encoder writes them (reproduced with msgpack-python),
// and the batch they describe. The llmd_sim_* files are written by
// scripts/gen-kvevent-llmd-fixtures.py, as llm-d's inference simulator encodes
// (decode-only), with more fields for actors/replica's TestEventFixtures; the
// sglang_* files (but sglang_batch) by scripts/gen-kvevent-sglang-fixtures.py,
// as SGLang's msgspec encoder writes its own structs.
type fixture struct {
	Name        string `json:"name"`
	Description string `json:"description"`
	Engine      Engine `json:"engine"`   // the schema to decode with; "" is vLLM's
	Encoding    string `json:"encoding"` // "map", "array", "sglang" or "mixed"
	Encode      bool   `json:"encode"`   // AppendBatch must reproduce Hex
	Hex         string `json:"hex"`
	Batch       struct {
		TS     float64        `json:"ts"`
		DPRank *int           `json:"dp_rank"`
		Events []fixtureEvent `json:"events"`
	} `json:"batch"`
}

type fixtureEvent struct {
	Type                     string   `json:"type"`
	BlockHashes              []uint64 `json:"block_hashes"`
	ParentBlockHash          *uint64  `json:"parent_block_hash"`
	TokenIDs                 []uint32 `json:"token_ids"`
	BlockSize                int      `json:"block_size"`
	LoraID                   *int     `json:"lora_id"`
	Medium                   *string  `json:"medium"`
	LoraName                 *string  `json:"lora_name"`
	ExtraKeysHex             *string  `json:"extra_keys_hex"`
	GroupIdx                 *int     `json:"group_idx"`
	KVCacheSpecKind          *string  `json:"kv_cache_spec_kind"`
	KVCacheSpecSlidingWindow *int     `json:"kv_cache_spec_sliding_window"`
	Locality                 *string  `json:"locality"`
	Ownership                *string  `json:"ownership"`
	SessionID                *string  `json:"session_id"`
	CacheSalt                *string  `json:"cache_salt"`
}

func loadFixtures(t testing.TB) []fixture {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(paths) == 0 {
		t.Fatalf("no fixtures in testdata (err %v); run scripts/gen-kvevent-fixtures.py", err)
	}
	var fs []fixture
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var f fixture
		if err := json.Unmarshal(data, &f); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		fs = append(fs, f)
	}
	return fs
}

func (f *fixture) bytes(t testing.TB) []byte {
	t.Helper()
	b, err := hex.DecodeString(f.Hex)
	if err != nil {
		t.Fatalf("%s: %v", f.Name, err)
	}
	return b
}

// batch builds the Batch the fixture describes.
func (f *fixture) batch(t testing.TB) *Batch {
	t.Helper()
	b := &Batch{TS: f.Batch.TS, DPRank: f.Batch.DPRank}
	for _, e := range f.Batch.Events {
		medium := ""
		if e.Medium != nil {
			medium = *e.Medium
		}
		switch e.Type {
		case "BlockStored":
			s := &BlockStored{
				BlockHashes: nilIfEmpty(e.BlockHashes), ParentBlockHash: e.ParentBlockHash,
				TokenIDs: nilIfEmpty(e.TokenIDs), BlockSize: e.BlockSize, LoraID: e.LoraID,
				Medium: medium, LoraName: e.LoraName, GroupIdx: e.GroupIdx,
				KVCacheSpecKind: e.KVCacheSpecKind, KVCacheSpecSlidingWindow: e.KVCacheSpecSlidingWindow,
				Locality: e.Locality, Ownership: e.Ownership, SessionID: e.SessionID, CacheSalt: e.CacheSalt,
			}
			if e.ExtraKeysHex != nil {
				raw, err := hex.DecodeString(*e.ExtraKeysHex)
				if err != nil {
					t.Fatal(err)
				}
				s.ExtraKeys = raw
			}
			b.Events = append(b.Events, s)
		case "BlockRemoved":
			b.Events = append(b.Events, &BlockRemoved{
				BlockHashes: nilIfEmpty(e.BlockHashes), Medium: medium,
				GroupIdx: e.GroupIdx, Locality: e.Locality, Ownership: e.Ownership,
			})
		case "AllBlocksCleared":
			b.Events = append(b.Events, &AllBlocksCleared{})
		default:
			t.Fatalf("%s: event type %q", f.Name, e.Type)
		}
	}
	return b
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

// equalBatch compares batches, timestamps by bits so that NaN equals itself.
func equalBatch(a, b *Batch) bool {
	if math.Float64bits(a.TS) != math.Float64bits(b.TS) {
		return false
	}
	x, y := *a, *b
	x.TS, y.TS = 0, 0
	return reflect.DeepEqual(&x, &y)
}

func TestFixtures(t *testing.T) {
	for _, f := range loadFixtures(t) {
		t.Run(f.Name, func(t *testing.T) {
			data := f.bytes(t)
			want := f.batch(t)
			got, err := Decode(data, f.Engine)
			if err != nil {
				t.Fatalf("Decode: %v", err)
			}
			if !equalBatch(got, want) {
				t.Fatalf("Decode:\n got %s\nwant %s", dump(got), dump(want))
			}
			if !f.Encode {
				return
			}
			enc := EncodingMap
			switch f.Encoding {
			case "array":
				enc = EncodingArray
			case "sglang":
				enc = EncodingSGLang
			}
			out := AppendBatch(nil, want, enc)
			if !bytes.Equal(out, data) {
				t.Fatalf("AppendBatch (%s):\n got %x\nwant %x", f.Encoding, out, data)
			}
		})
	}
}

// TestFixtureV026Capture pins the decoded values of the one real capture, so
// that a regenerated fixture cannot silently drift from vllm.md §1.2.
func TestFixtureV026Capture(t *testing.T) {
	for _, f := range loadFixtures(t) {
		if f.Name != "v0_26_0_capture" {
			continue
		}
		b, err := DecodeBatch(f.bytes(t))
		if err != nil {
			t.Fatal(err)
		}
		s, ok := b.Events[0].(*BlockStored)
		if !ok || b.TS != 1789095808.8378847 || *b.DPRank != 0 || len(b.Events) != 1 {
			t.Fatalf("batch %s", dump(b))
		}
		if s.BlockHashes[0] != 15760518052499183552 || s.ParentBlockHash != nil || s.BlockSize != 16 ||
			s.Medium != "GPU" || s.LoraID != nil || s.LoraName != nil || *s.GroupIdx != 0 ||
			*s.KVCacheSpecKind != "full_attention" || !bytes.Equal(s.ExtraKeys, []byte{0x91, 0xc0}) ||
			len(s.TokenIDs) != 16 {
			t.Fatalf("event %s", dump(b))
		}
		return
	}
	t.Fatal("fixture v0_26_0_capture missing")
}

func dump(b *Batch) string {
	out, err := json.Marshal(b)
	if err != nil {
		return err.Error()
	}
	var evs []string
	for _, e := range b.Events {
		j, _ := json.Marshal(e)
		evs = append(evs, reflect.TypeOf(e).Elem().Name()+string(j))
	}
	j, _ := json.Marshal(evs)
	return string(out) + " " + string(j)
}

func TestFixturesRejectTruncation(t *testing.T) {
	// Every proper prefix of a well-formed batch is malformed.
	for _, f := range loadFixtures(t) {
		data := f.bytes(t)
		if len(data) > 4096 {
			continue
		}
		for n := range len(data) {
			if _, err := Decode(data[:n], f.Engine); !errors.Is(err, ErrMalformed) {
				t.Fatalf("%s: prefix %d/%d: err %v, want ErrMalformed", f.Name, n, len(data), err)
			}
		}
	}
}
