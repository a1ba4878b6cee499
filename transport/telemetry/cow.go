package telemetry

import (
	"maps"
	"sync"
	"sync/atomic"
)

// cowMap is a map that every request reads and that changes rarely (a
// replica, model or policy seen for the first time; a replica gone). A
// read is one atomic load and a lookup, with no lock whose cache line the
// gateway's cores would pass back and forth on every request, as the
// RWMutex it replaces did (issue 16). Writers copy the map, holding a
// lock of the caller's that keeps them apart.
type cowMap[K comparable, V any] struct {
	p atomic.Pointer[map[K]V]
}

// get returns k's value, and whether it is there.
func (c *cowMap[K, V]) get(k K) (V, bool) {
	if m := c.p.Load(); m != nil {
		v, ok := (*m)[k]
		return v, ok
	}
	var zero V
	return zero, false
}

// getOrMake returns k's value, making and storing it first, holding mu,
// if it is not there.
func (c *cowMap[K, V]) getOrMake(mu sync.Locker, k K, make func() V) V {
	if v, ok := c.get(k); ok {
		return v
	}
	mu.Lock()
	defer mu.Unlock()
	if v, ok := c.get(k); ok {
		return v
	}
	v := make()
	c.set(k, v)
	return v
}

// snapshot returns the map as it is now, which is never changed: a
// caller may range over it, and must not write to it.
func (c *cowMap[K, V]) snapshot() map[K]V {
	if m := c.p.Load(); m != nil {
		return *m
	}
	return nil
}

// set stores v under k. The caller holds the writers' lock.
func (c *cowMap[K, V]) set(k K, v V) {
	m := maps.Clone(c.snapshot())
	if m == nil {
		m = make(map[K]V, 1)
	}
	m[k] = v
	c.p.Store(&m)
}

// delete removes the keys for which drop is true, called once per key;
// the map is copied only when one goes. The caller holds the writers'
// lock.
func (c *cowMap[K, V]) delete(drop func(K, V) bool) {
	old := c.snapshot()
	var gone []K
	for k, v := range old {
		if drop(k, v) {
			gone = append(gone, k)
		}
	}
	if len(gone) == 0 {
		return
	}
	m := maps.Clone(old)
	for _, k := range gone {
		delete(m, k)
	}
	c.p.Store(&m)
}
