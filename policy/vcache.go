package policy

import (
	"slices"
	"sync"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// virtualCache is a topdown.VirtualCache (OPA's per-query cache of rule values) that is recycled between
// evaluations. OPA builds a fresh hash trie for every query; with dozens of policies per review that was a
// quarter of the bytes allocated per evaluation. This one keeps each frame as a map from the reference's
// hash to a short list of entries and clears it, keeping its memory, when the evaluation ends. Lookups have
// the same exact-match semantics as OPA's.
type virtualCache struct {
	frames []vcFrame
	depth  int // frames[:depth] are in use; the rest are cleared spares
}

type vcFrame map[int][]vcEntry

type vcEntry struct {
	ref       ast.Ref
	value     *ast.Term
	undefined bool
}

var _ topdown.VirtualCache = (*virtualCache)(nil)

// virtualCachePool recycles caches between evaluations; it holds no data between uses.
type virtualCachePool struct {
	pool sync.Pool
}

// acquire returns an empty cache with one frame, as topdown.NewVirtualCache does.
func (p *virtualCachePool) acquire() *virtualCache {
	c, ok := p.pool.Get().(*virtualCache)
	if !ok {
		c = &virtualCache{}
	}
	c.Push()
	return c
}

// release clears c and returns it to the pool. c must not be used afterwards.
func (p *virtualCachePool) release(c *virtualCache) {
	for c.depth > 0 {
		c.Pop()
	}
	p.pool.Put(c)
}

// Push starts a new, empty frame.
func (c *virtualCache) Push() {
	if c.depth == len(c.frames) {
		c.frames = append(c.frames, vcFrame{})
	}
	c.depth++
}

// Pop drops the top frame and its entries.
func (c *virtualCache) Pop() {
	c.depth--
	clear(c.frames[c.depth])
}

func (c *virtualCache) top() vcFrame { return c.frames[c.depth-1] }

// Get returns the cached value of ref; the second result reports a cached undefined result.
func (c *virtualCache) Get(ref ast.Ref) (*ast.Term, bool) {
	for _, e := range c.top()[ref.Hash()] {
		if e.ref.Equal(ref) {
			if e.undefined {
				return nil, true
			}
			return e.value, false
		}
	}
	return nil, false
}

// Put records the value of ref; a nil value records that ref is undefined.
func (c *virtualCache) Put(ref ast.Ref, value *ast.Term) {
	frame := c.top()
	h := ref.Hash()
	bucket := frame[h]
	for i := range bucket {
		if bucket[i].ref.Equal(ref) {
			if value != nil {
				bucket[i].value = value
			} else {
				bucket[i].undefined = true
			}
			return
		}
	}
	// The caller may reuse ref's backing array, so keep a copy of the (immutable) terms.
	frame[h] = append(bucket, vcEntry{ref: slices.Clone(ref), value: value, undefined: value == nil})
}

// Keys lists the references with a cached value in the top frame.
func (c *virtualCache) Keys() []ast.Ref {
	var keys []ast.Ref
	for _, bucket := range c.top() {
		for _, e := range bucket {
			if e.value != nil {
				keys = append(keys, e.ref)
			}
		}
	}
	return keys
}
