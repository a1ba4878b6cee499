package kvevent

import (
	"errors"
	"math/rand/v2"
	"testing"
)

// sglangView is what of b SGLang's schema can carry: the fields
// EncodingSGLang writes, the others cleared.
func sglangView(b *Batch) *Batch {
	out := &Batch{TS: b.TS, DPRank: b.DPRank}
	for _, ev := range b.Events {
		switch e := ev.(type) {
		case *BlockStored:
			out.Events = append(out.Events, &BlockStored{BlockHashes: e.BlockHashes, ParentBlockHash: e.ParentBlockHash,
				TokenIDs: e.TokenIDs, BlockSize: e.BlockSize, LoraID: e.LoraID, Medium: e.Medium, CacheSalt: e.CacheSalt})
		case *BlockRemoved:
			out.Events = append(out.Events, &BlockRemoved{BlockHashes: e.BlockHashes, Medium: e.Medium})
		default:
			out.Events = append(out.Events, ev)
		}
	}
	return out
}

// The same bytes mean different things to vLLM's and SGLang's schemas: a
// BlockStoredWithMetadata's seventh field is SGLang's metadata map, where
// vLLM has lora_name (a str), and EAGLE bigram token ids are arrays. Read
// as vLLM's, the batch is malformed and every event in it is lost, which is
// why a replica names its engine_type.
func TestSGLangNeedsItsSchema(t *testing.T) {
	for _, f := range loadFixtures(t) {
		if f.Name != "sglang_cache_salt" && f.Name != "sglang_bigram_tokens" {
			continue
		}
		if _, err := Decode(f.bytes(t), EngineVLLM); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s read with vLLM's schema: err %v, want ErrMalformed", f.Name, err)
		}
		if _, err := Decode(f.bytes(t), EngineSGLang); err != nil {
			t.Errorf("%s read with SGLang's schema: %v", f.Name, err)
		}
	}
}

// A salted run cannot be rebuilt from its token ids.
func TestCacheSaltIsNotPlain(t *testing.T) {
	salt := "s"
	e := &BlockStored{BlockHashes: []uint64{1, 2}, TokenIDs: []uint32{1, 2}, BlockSize: 1, CacheSalt: &salt}
	for i, p := range e.PlainBlocks() {
		if p {
			t.Errorf("block %d of a salted run is plain", i)
		}
	}
	e.CacheSalt = nil
	for i, p := range e.PlainBlocks() {
		if !p {
			t.Errorf("block %d of an unsalted run is not plain", i)
		}
	}
}

// EncodingSGLang writes every field of SGLang's schema, so a batch comes
// back as sglangView of itself, hashes of 2^63 and up (negative int64 on the
// wire) included.
func TestSGLangRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(17, 1))
	for i := range 200 {
		b := randBatch(r)
		if i%3 == 0 {
			for _, ev := range b.Events {
				if s, ok := ev.(*BlockStored); ok {
					salt := "tenant"
					s.CacheSalt = &salt
				}
			}
		}
		data := AppendBatch(nil, b, EncodingSGLang)
		got, err := Decode(data, EngineSGLang)
		if err != nil {
			t.Fatalf("batch %d: %v\n%x", i, err, data)
		}
		if want := sglangView(b); !equalBatch(got, want) {
			t.Fatalf("batch %d:\n got %s\nwant %s", i, dump(got), dump(want))
		}
	}
}

func FuzzDecodeSGLang(f *testing.F) {
	for _, fx := range loadFixtures(f) {
		f.Add(fx.bytes(f))
	}
	r := rand.New(rand.NewPCG(5, 6))
	for range 8 {
		f.Add(AppendBatch(nil, randBatch(r), EncodingSGLang))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		b, err := Decode(data, EngineSGLang)
		if failed(t, b, err) {
			return
		}
		out := AppendBatch(nil, b, EncodingSGLang)
		again, err := Decode(out, EngineSGLang)
		if err != nil {
			t.Fatalf("re-decode: %v\n%x", err, out)
		}
		if want := sglangView(b); !equalBatch(again, want) {
			t.Fatalf("\n got %s\nwant %s", dump(again), dump(want))
		}
	})
}
