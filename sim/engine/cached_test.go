package engine

import (
	"testing"

	"github.com/inferrail/inferrail/model/prefix"
)

// Cached answers what the next admission of the same prompt finds, one
// block short of a fully cached prompt, and changes nothing.
func TestCachedMatchesAdmission(t *testing.T) {
	e := mustNew(t, testConfig())
	var h prefix.Hasher
	prompt := tokens(1, 100) // 6 full blocks
	chain := h.Chain(nil, testRoot, prompt, 16)
	if got := e.Cached(chain, len(prompt)); got != 0 {
		t.Fatalf("cold engine: Cached = %d, want 0", got)
	}
	if err := e.Add(request("a", prompt, 2)); err != nil {
		t.Fatal(err)
	}
	drain(t, e, 0, nil)
	if got := e.Cached(chain, len(prompt)); got != 96 {
		t.Fatalf("after a: Cached = %d, want 96", got)
	}
	exact := tokens(1, 96) // 6 full blocks exactly: the last one recomputes
	if got := e.Cached(h.Chain(nil, testRoot, exact, 16), len(exact)); got != 80 {
		t.Fatalf("block-aligned prompt: Cached = %d, want 80", got)
	}
	other := append(tokens(1, 40), tokens(500, 60)...) // shares 2 full blocks
	if got := e.Cached(h.Chain(nil, testRoot, other, 16), len(other)); got != 32 {
		t.Fatalf("diverging prompt: Cached = %d, want 32", got)
	}
	b := request("b", prompt, 2)
	if err := e.Add(b); err != nil {
		t.Fatal(err)
	}
	drain(t, e, 0, nil)
	if b.CachedTokens != 96 {
		t.Fatalf("admission found %d cached, Cached said 96", b.CachedTokens)
	}
	off := testConfig()
	off.PrefixCaching = false
	if got := mustNew(t, off).Cached(chain, len(prompt)); got != 0 {
		t.Fatalf("prefix caching off: Cached = %d, want 0", got)
	}
}
