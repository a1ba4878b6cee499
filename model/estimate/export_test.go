package estimate

import (
	"reflect"
	"testing"

	"github.com/inferrail/inferrail/model/kvindex"
)

// An instance that imports a peer's mapping and index recognises the
// engine's later events about blocks stored before it subscribed: a child
// stored under an imported parent is rebuilt, and an imported block's
// eviction leaves the index. Without the import neither happens.
func TestEventsImport(t *testing.T) {
	peerX, peer := kvindex.New(100), NewEvents("m", EventChecks{})
	toks, chain := prompt("m", 1, 6)
	peer.Apply(batch(stored(toks, chain, 0, 4)), peerX)

	run := func(imported bool) (held int, after int) {
		x, ev := kvindex.New(100), NewEvents("m", EventChecks{})
		if imported {
			ev.Import(peer.Export(nil))
			for h := range peerX.All() {
				x.Record(append(chain[:0:0], h))
			}
		}
		ev.Apply(batch(stored(toks, chain, 4, 6)), x)
		held = x.Lookup(chain)
		ev.Apply(batch(removed(chain[5], chain[4], chain[3])), x)
		return held, x.Lookup(chain)
	}
	if held, after := run(true); held != 6 || after != 3 {
		t.Fatalf("imported: %d blocks held after the child's event, %d after the evictions; want 6 and 3", held, after)
	}
	if held, _ := run(false); held != 0 {
		t.Fatalf("not imported: %d blocks held, want 0 (the parent is unknown)", held)
	}
	// Export is sorted, and an import of an export exports the same.
	again := NewEvents("m", EventChecks{})
	again.Import(peer.Export(nil))
	if a, b := again.Export(nil), peer.Export(nil); !reflect.DeepEqual(a, b) || len(a) != 4 {
		t.Fatalf("export after import %+v, want %+v", a, b)
	}
}
