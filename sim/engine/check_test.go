package engine

import (
	"fmt"
	"maps"
	"strings"
	"testing"

	"github.com/inferrail/inferrail/model/kvevent"
)

func fmtEvents(evs []kvevent.Event) string {
	var b strings.Builder
	for _, ev := range evs {
		switch ev := ev.(type) {
		case *kvevent.BlockStored:
			parent := "nil"
			if ev.ParentBlockHash != nil {
				parent = fmt.Sprint(*ev.ParentBlockHash)
			}
			fmt.Fprintf(&b, "[stored %v parent %s %d tokens] ", ev.BlockHashes, parent, len(ev.TokenIDs))
		case *kvevent.BlockRemoved:
			fmt.Fprintf(&b, "[removed %v] ", ev.BlockHashes)
		case *kvevent.AllBlocksCleared:
			b.WriteString("[cleared] ")
		}
	}
	return b.String()
}

// mirror is what a KV-event consumer knows: a multiset of External hashes.
type mirror map[uint64]int

func (m mirror) apply(t *testing.T, evs []kvevent.Event) {
	t.Helper()
	for _, ev := range evs {
		switch ev := ev.(type) {
		case *kvevent.BlockStored:
			for _, h := range ev.BlockHashes {
				m[h]++
			}
		case *kvevent.BlockRemoved:
			for _, h := range ev.BlockHashes {
				if m[h] == 0 {
					t.Fatalf("removed %d, which was never stored", h)
				}
				m[h]--
				if m[h] == 0 {
					delete(m, h)
				}
			}
		case *kvevent.AllBlocksCleared:
			clear(m)
		}
	}
}

// poolHashes is the multiset of External hashes p's blocks hold.
func poolHashes(p *pool) mirror {
	m := mirror{}
	for _, b := range p.blocks[:p.numBlocks()] {
		if b.hashed {
			m[b.hash.External()]++
		}
	}
	return m
}

func checkMirror(t *testing.T, m mirror, e *Engine) {
	t.Helper()
	if got := poolHashes(e.pool); !maps.Equal(got, map[uint64]int(m)) {
		t.Fatalf("event mirror %v, pool holds %v", m, got)
	}
}

// checkEngine verifies the engine's invariants: block references match the
// block tables, the free queue holds exactly the free blocks, cached blocks
// match the hash map and the requests' chain hashes.
func checkEngine(t *testing.T, e *Engine) {
	t.Helper()
	p := e.pool
	refs := make([]int32, p.numBlocks())
	bs := e.cfg.BlockSize
	if len(e.running) > e.cfg.MaxNumSeqs {
		t.Fatalf("%d running > max_num_seqs %d", len(e.running), e.cfg.MaxNumSeqs)
	}
	for _, s := range e.running {
		if s.status != running {
			t.Fatalf("%s in running list with status %d", s.r.ID, s.status)
		}
		if need := (s.computed + bs - 1) / bs; len(s.blocks) < need {
			t.Fatalf("%s: %d blocks for %d computed tokens", s.r.ID, len(s.blocks), s.computed)
		}
		if s.computed >= s.numTokens() {
			t.Fatalf("%s: running with nothing to compute (%d/%d)", s.r.ID, s.computed, s.numTokens())
		}
		for i, id := range s.blocks {
			refs[id]++
			if i < s.numCached && e.cfg.PrefixCaching {
				if b := p.blocks[id]; !b.hashed || b.hash != s.hashes[i] {
					t.Fatalf("%s: block %d (#%d) not cached with its chain hash", s.r.ID, id, i)
				}
			}
		}
	}
	for i := range e.waiting.len() {
		s := e.waiting.at(i)
		if s.status != waiting || len(s.blocks) != 0 || s.computed != 0 {
			t.Fatalf("%s waiting with status %d, %d blocks, %d computed", s.r.ID, s.status, len(s.blocks), s.computed)
		}
	}
	queued := map[int32]bool{}
	for _, id := range queueOrder(p) {
		queued[id] = true
	}
	if len(queued) != p.numFree() {
		t.Fatalf("free queue holds %d blocks, numFree %d", len(queued), p.numFree())
	}
	ncached := 0
	for id, b := range p.blocks[:p.numBlocks()] {
		if b.ref != refs[id] {
			t.Fatalf("block %d: ref %d, block tables hold it %d times", id, b.ref, refs[id])
		}
		if queued[int32(id)] != (b.ref == 0) {
			t.Fatalf("block %d: ref %d, queued %v", id, b.ref, queued[int32(id)])
		}
		if b.hashed {
			ncached++
			if !e.cfg.PrefixCaching {
				t.Fatalf("block %d hashed with caching off", id)
			}
		}
	}
	n := 0
	for h, l := range hashMap(p) {
		for _, id := range l {
			if b := p.blocks[id]; !b.hashed || b.hash != h {
				t.Fatalf("map entry %v → %d, block holds %v", h, id, b.hash)
			}
			n++
		}
	}
	if n != ncached || ncached != p.ncached {
		t.Fatalf("map holds %d blocks, %d blocks hashed, ncached %d", n, ncached, p.ncached)
	}
}
