package policy

import (
	"fmt"
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"time"

	"github.com/open-policy-agent/opa/v1/topdown"
)

// DefaultMemoryBudget is how far the heap may grow while the policies of one review are evaluated before
// the engine stops them: 256 MiB, a quarter of the operator's shipped 1 GiB container limit. No realistic
// policy comes near it (evaluating a NodePool against the whole library allocates well under a megabyte),
// while a policy that builds huge values is stopped long before the operator runs out of memory.
const DefaultMemoryBudget int64 = 256 << 20

// heapObjectsMetric is the runtime/metrics name of the bytes held by heap objects, live or not yet swept.
// It falls when the garbage collector frees memory, so garbage the rest of the operator leaves behind
// counts only until the next collection, unlike the cumulative allocation counter.
const heapObjectsMetric = "/memory/classes/heap/objects:bytes"

// memorySampleInterval is how often the heap is read while evaluations run. Between two samples a policy
// allocates at most a few megabytes: OPA allocates well below 2 GB/s on one core. (Builtins that could
// build a huge value in a single call are bounded separately, see builtinlimits.go.)
const memorySampleInterval = time.Millisecond

// memorySamplerIdle is how long the sampler goroutine keeps sampling without evaluations before it exits,
// so that steady traffic does not start one goroutine per review while an idle engine holds none.
const memorySamplerIdle = 100 * time.Millisecond

// MemoryBudgetError is the error of a policy whose evaluation was stopped because the heap grew past the
// engine's memory budget (Options.MemoryBudget) while it ran. The heap is shared by the whole process, so
// every policy being evaluated at that moment by the same engine is stopped with this error.
type MemoryBudgetError struct {
	// Policy is the name of the stopped policy.
	Policy string
	// Budget is the engine's memory budget in bytes.
	Budget int64
	// Growth is how much the heap had grown, in bytes, since the evaluation began when it was stopped.
	Growth int64
}

// Error names the policy, the growth, the budget and what to change in the policy.
func (e *MemoryBudgetError) Error() string {
	return fmt.Sprintf("policy %s: evaluation stopped: the heap grew by %s while it ran, past the policy memory budget of %s; "+
		"this policy, or one evaluated at the same time, builds values far larger than the reviewed object (huge comprehensions, ranges or strings): "+
		"iterate over the object's own collections instead of building collections from numbers",
		e.Policy, formatBytes(e.Growth), formatBytes(e.Budget))
}

// formatBytes renders n in MiB with one decimal, or in bytes below 1 MiB.
func formatBytes(n int64) string {
	if n < 1<<20 {
		return fmt.Sprintf("%d bytes", n)
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}

// memoryGuard watches the heap while evaluations run and cancels those during which it grew past the
// budget. Each Evaluate opens a window (begin) with the heap size at that moment and closes it (end) when
// its policies are done; one sampler goroutine, running only while windows are open (and for
// memorySamplerIdle after), reads the heap every memorySampleInterval and, once the heap has grown past the
// budget from the lowest start of the open windows, cancels every open window. A window's start follows the
// heap down (garbage collected while it is open is not its budget), so garbage that earlier evaluations left
// behind cannot hide new growth. The heap belongs to the whole process, so the growth is not attributed to
// one evaluation: every window open at that moment is cancelled, which is the safe side for a memory limit.
// When the last cancelled window closes, a collection is started, so that what the stopped evaluations
// built does not count in the next window's start.
type memoryGuard struct {
	budget   uint64 // 0: disabled
	interval time.Duration
	read     func() uint64 // the heap size in bytes: readHeap, or a fake in tests

	mu       sync.Mutex
	windows  map[*memoryWindow]struct{}
	sampling bool   // the sampler goroutine is running
	last     uint64 // the sampler's latest heap reading, valid while sampling
}

// memoryWindow is one Evaluate call as the memory guard sees it.
type memoryWindow struct {
	start    uint64 // heap bytes when the window opened
	cancel   topdown.Cancel
	exceeded atomic.Bool
	growth   atomic.Uint64 // heap growth when the budget was exceeded
}

// newMemoryGuard returns a guard enforcing budget bytes on the heap size read returns, sampled every
// interval; a budget of zero or less disables it.
func newMemoryGuard(budget int64, interval time.Duration, read func() uint64) *memoryGuard {
	g := &memoryGuard{interval: interval, read: read, windows: map[*memoryWindow]struct{}{}}
	if budget > 0 {
		g.budget = uint64(budget)
	}
	return g
}

// readHeap returns the bytes currently held by heap objects.
func readHeap() uint64 {
	s := [1]metrics.Sample{{Name: heapObjectsMetric}}
	metrics.Read(s[:])
	if s[0].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	return s[0].Value.Uint64()
}

// begin opens a window whose evaluations cancel raises when the heap grows past the budget. It returns nil
// when the guard is disabled; end accepts nil.
func (g *memoryGuard) begin(cancel topdown.Cancel) *memoryWindow {
	if g.budget == 0 {
		return nil
	}
	w := &memoryWindow{cancel: cancel}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.sampling {
		// The sampler read the heap less than an interval ago: reuse its reading rather than pay for another.
		w.start = g.last
	} else {
		w.start = g.read()
		g.last = w.start
		g.sampling = true
		go g.sample()
	}
	g.windows[w] = struct{}{}
	return w
}

// end closes w.
func (g *memoryGuard) end(w *memoryWindow) {
	if w == nil {
		return
	}
	g.mu.Lock()
	delete(g.windows, w)
	collect := w.exceeded.Load()
	for o := range g.windows {
		if o.exceeded.Load() {
			collect = false // the last stopped evaluation to end collects
		}
	}
	g.mu.Unlock()
	if collect {
		// What the stopped evaluations built is garbage now; collect it before the next evaluation
		// counts it in its start.
		go runtime.GC()
	}
}

// sample reads the heap every interval and cancels the windows over budget, until no window has been open
// for memorySamplerIdle.
func (g *memoryGuard) sample() {
	ticker := time.NewTicker(g.interval)
	defer ticker.Stop()
	idle := 0
	idleTicks := max(1, int(memorySamplerIdle/g.interval))
	for range ticker.C {
		heap := g.read()
		g.mu.Lock()
		g.last = heap
		if len(g.windows) == 0 {
			idle++
			if idle >= idleTicks {
				g.sampling = false
				g.mu.Unlock()
				return
			}
			g.mu.Unlock()
			continue
		}
		idle = 0
		base := heap
		for w := range g.windows {
			w.start = min(w.start, heap) // garbage collected while w is open is not w's budget
			base = min(base, w.start)
		}
		if heap-base > g.budget {
			for w := range g.windows {
				if !w.exceeded.Load() {
					w.growth.Store(heap - base)
					w.exceeded.Store(true)
					w.cancel.Cancel()
				}
			}
		}
		g.mu.Unlock()
	}
}

// stopped reports whether the guard cancelled w, and the heap growth it saw then.
func (w *memoryWindow) stopped() (bool, int64) {
	if w == nil || !w.exceeded.Load() {
		return false, 0
	}
	return true, int64(w.growth.Load())
}
