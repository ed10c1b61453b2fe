package policy

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"

	"github.com/open-policy-agent/opa/v1/topdown"
)

// waitFor polls cond until it holds or a generous deadline passes: it samples the condition instead of
// sleeping for a fixed time and hoping the sampler has run.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	err := wait.PollUntilContextTimeout(context.Background(), time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return cond(), nil
	})
	if err != nil {
		t.Fatalf("timed out waiting until %s", what)
	}
}

func TestMemoryGuardCancelsWindowsOverBudget(t *testing.T) {
	const budget = 100
	tests := []struct {
		name string
		// heap at which each window opens, then the heap the sampler sees afterwards
		starts []uint64
		after  uint64
		// which windows must be cancelled
		cancelled []bool
		growth    []int64
	}{
		{"within budget", []uint64{1000}, 1100, []bool{false}, []int64{0}},
		{"one byte over", []uint64{1000}, 1101, []bool{true}, []int64{101}},
		{"heap shrank after a collection", []uint64{1000}, 500, []bool{false}, []int64{0}},
		// Growth is measured from the lowest start of the open windows, and every open window is stopped:
		// the heap is the process's, so the later window may be the one that grew it.
		{"every open window once the heap grew past the budget", []uint64{1000, 1080}, 1150, []bool{true, true}, []int64{150, 150}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var heap atomic.Uint64
			var samples atomic.Int64
			g := newMemoryGuard(budget, time.Millisecond, func() uint64 { samples.Add(1); return heap.Load() })
			windows := make([]*memoryWindow, len(tc.starts))
			cancels := make([]topdown.Cancel, len(tc.starts))
			for i, s := range tc.starts {
				heap.Store(s)
				// Wait for a sample at this level, so the window's start is the sampler's reading of it.
				n := samples.Load()
				if i > 0 {
					waitFor(t, "the sampler reads the new heap size", func() bool { return samples.Load() > n+1 })
				}
				cancels[i] = topdown.NewCancel()
				windows[i] = g.begin(cancels[i])
			}
			heap.Store(tc.after)
			n := samples.Load()
			waitFor(t, "two more samples", func() bool { return samples.Load() > n+2 })
			for i, w := range windows {
				stopped, growth := w.stopped()
				if stopped != tc.cancelled[i] || cancels[i].Cancelled() != tc.cancelled[i] || growth != tc.growth[i] {
					t.Errorf("window %d (start %d, heap %d): stopped=%v cancelled=%v growth=%d, want stopped=cancelled=%v growth=%d",
						i, tc.starts[i], tc.after, stopped, cancels[i].Cancelled(), growth, tc.cancelled[i], tc.growth[i])
				}
				g.end(w)
			}
		})
	}
}

func TestMemoryGuardSamplerStopsWhenIdle(t *testing.T) {
	g := newMemoryGuard(100, time.Millisecond, func() uint64 { return 0 })
	running := func() bool {
		g.mu.Lock()
		defer g.mu.Unlock()
		return g.sampling
	}
	for round := range 2 {
		w := g.begin(topdown.NewCancel())
		if !running() {
			t.Fatalf("round %d: no sampler while a window is open", round)
		}
		g.end(w)
		waitFor(t, "the idle sampler exits", func() bool { return !running() })
	}
	if w := newMemoryGuard(0, time.Millisecond, func() uint64 { return 0 }).begin(topdown.NewCancel()); w != nil {
		t.Errorf("a disabled guard opened a window")
	}
}
