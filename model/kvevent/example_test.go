package kvevent_test

import (
	"fmt"

	"github.com/inferrail/inferrail/model/kvevent"
)

func ExampleAppendBatch() {
	rank := 0
	b := &kvevent.Batch{TS: 1.5, DPRank: &rank, Events: []kvevent.Event{
		&kvevent.BlockRemoved{BlockHashes: []uint64{42}, Medium: "GPU"},
	}}
	fmt.Printf("map:   %x\n", kvevent.AppendBatch(nil, b, kvevent.EncodingMap))
	fmt.Printf("array: %x\n", kvevent.AppendBatch(nil, b, kvevent.EncodingArray))
	// Output:
	// map:   93cb3ff80000000000009183a474797065ac426c6f636b52656d6f766564ac626c6f636b5f686173686573912aa66d656469756da347505500
	// array: 93cb3ff80000000000009193ac426c6f636b52656d6f766564912aa347505500
}

func ExampleDecodeBatch() {
	// ["BlockStored", [7], null, [1, 2], 2, null, "GPU", null] in a batch
	// with dp rank 0, as vLLM ≤ v0.22 sends it.
	data := []byte{0x93, 0xcb, 0x3f, 0xf8, 0, 0, 0, 0, 0, 0, 0x91,
		0x98, 0xab, 'B', 'l', 'o', 'c', 'k', 'S', 't', 'o', 'r', 'e', 'd',
		0x91, 0x07, 0xc0, 0x92, 0x01, 0x02, 0x02, 0xc0, 0xa3, 'G', 'P', 'U', 0xc0, 0x00}
	b, err := kvevent.DecodeBatch(data)
	if err != nil {
		fmt.Println(err)
		return
	}
	s := b.Events[0].(*kvevent.BlockStored)
	fmt.Println(b.TS, *b.DPRank, s.BlockHashes, s.ParentBlockHash == nil, s.TokenIDs, s.BlockSize, s.Medium)
	// Output: 1.5 0 [7] true [1 2] 2 GPU
}

func ExampleMirror() {
	m := kvevent.NewMirror("GPU")
	parent := uint64(11)
	err := m.Apply(&kvevent.Batch{Events: []kvevent.Event{
		&kvevent.BlockStored{BlockHashes: []uint64{10, 11}, TokenIDs: []uint32{1, 2, 3, 4}, BlockSize: 2, Medium: "GPU"},
		&kvevent.BlockStored{BlockHashes: []uint64{12}, ParentBlockHash: &parent, TokenIDs: []uint32{5, 6}, BlockSize: 2, Medium: "GPU"},
		&kvevent.BlockRemoved{BlockHashes: []uint64{10}, Medium: "GPU"},
	}})
	fmt.Println(err, m.Len(), m.Count(10), m.Count(12))
	chain, ok := m.Chain(nil, 12)
	fmt.Println(chain, ok) // block 10 was evicted, so the chain is broken
	tokens, ok := m.Prefix(nil, 11)
	fmt.Println(tokens, ok)
	// Output:
	// <nil> 2 0 1
	// [] false
	// [] false
}
