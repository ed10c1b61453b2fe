package policy_test

import (
	"context"
	"errors"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/joiner-dev/joiner/policy"
)

// heapBytes reads the bytes held by heap objects, the measure the engine's memory budget watches.
func heapBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// heapWatch samples the heap on its own goroutine, as fast as it can, until stop returns the largest
// growth over the level at the start. The invariant "the heap stays under the budget" is checked on every
// sample taken while the evaluation runs, not on one reading taken afterwards.
type heapWatch struct {
	base uint64
	peak atomic.Uint64
	done chan struct{}
	wg   sync.WaitGroup
}

func watchHeap() *heapWatch {
	runtime.GC()
	w := &heapWatch{base: heapBytes(), done: make(chan struct{})}
	w.peak.Store(w.base)
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for {
			if h := heapBytes(); h > w.peak.Load() {
				w.peak.Store(h)
			}
			select {
			case <-w.done:
				return
			case <-time.After(100 * time.Microsecond):
			}
		}
	}()
	return w
}

// stop ends the sampling and returns the largest growth of the heap seen.
func (w *heapWatch) stop() int64 {
	close(w.done)
	w.wg.Wait()
	return int64(w.peak.Load() - w.base)
}

// The policy, with the range bound taken from the parameters so that it cannot be refused when
// the policy is admitted: numbers.range builds the whole array in one uninterruptible call.
const rangeFromInput = `package mem.rangeinput

violation contains {"msg": "mem"} if { count(numbers.range(1, input.parameters.n)) < 0 }
`

// Every pair of numbers up to n: each range is small enough for the builtin bound, but the comprehension
// grows without end (n² elements), one element at a time. Only the memory budget can stop it.
const pairsFromInput = `package mem.pairs

violation contains {"msg": "mem"} if { count([[i, j] | some i in numbers.range(1, input.parameters.n); some j in numbers.range(1, input.parameters.n)]) < 0 }
`

func TestMemoryBudgetStopsRuntimeAllocation(t *testing.T) {
	const budget = 64 << 20
	// The guard samples every millisecond; what the policy allocates between a sample and the
	// cancellation (a scheduling delay on a loaded machine) and what the rest of the test binary holds
	// come on top.
	const slack = 32 << 20
	tests := []struct {
		action  policy.Action
		allowed bool // Verdict.Allowed(failClosed=true)
	}{
		{policy.ActionDeny, false},
		{policy.ActionWarn, true},
		{policy.ActionDryRun, true},
	}
	for _, tc := range tests {
		t.Run(string(tc.action), func(t *testing.T) {
			// The deadline is far away: the memory budget, not the deadline, must stop the policy.
			e := mustEngine(t, policy.Options{MemoryBudget: budget, EvalTimeout: time.Minute, Parallelism: 1},
				policy.Policy{Name: "pairs", Rego: pairsFromInput, EnforcementAction: tc.action, Parameters: map[string]any{"n": 100000}})
			review := mustReview(t, policy.OperationCreate, nodePool("np", nil, nil), nil)
			watch := watchHeap()
			start := time.Now()
			vs, err := e.Evaluate(context.Background(), review)
			elapsed := time.Since(start)
			growth := watch.stop()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("stopped after %s; heap grew by at most %.1f MiB (budget %d MiB)", elapsed.Round(time.Millisecond), float64(growth)/(1<<20), budget>>20)
			if len(vs) != 1 || !vs[0].IsError() || vs[0].Action != tc.action {
				t.Fatalf("results = %+v, want one %s error", vs, tc.action)
			}
			var mbe *policy.MemoryBudgetError
			if !errors.As(vs[0].Err, &mbe) || mbe.Policy != "pairs" || mbe.Budget != budget || mbe.Growth <= budget {
				t.Fatalf("error = %v, want a MemoryBudgetError for pairs over %d bytes", vs[0].Err, budget)
			}
			for _, want := range []string{"[pairs] policy evaluation failed: policy pairs: evaluation stopped", "policy memory budget of 64.0 MiB"} {
				if !strings.Contains(vs[0].String(), want) {
					t.Errorf("message %q does not contain %q", vs[0].String(), want)
				}
			}
			if growth > budget+slack {
				t.Errorf("heap grew by %d MiB, want at most the %d MiB budget plus %d MiB", growth>>20, budget>>20, slack>>20)
			}
			if got := policy.NewVerdict(vs).Allowed(true); got != tc.allowed {
				t.Errorf("Allowed(failClosed) = %v, want %v for a %s policy", got, tc.allowed, tc.action)
			}
		})
	}
}

// TestMemoryStaysBoundedThenServes evaluates the policy (and its comprehension variant) with
// bounds from the parameters, checks on every heap sample that the heap never grows past the budget, and
// then that the same engine still evaluates: the policy itself with a small bound, and another policy.
func TestMemoryStaysBoundedThenServes(t *testing.T) {
	const budget = 64 << 20
	const slack = 32 << 20
	tests := []struct {
		name    string
		rego    string
		n       int
		stopped func(error) bool
	}{
		{"numbers.range from input", rangeFromInput, 100000000, func(err error) bool {
			var le *policy.BuiltinLimitError
			return errors.As(err, &le) && le.Builtin == "numbers.range" && le.Size == 100000000 && le.Limit == policy.MaxBuiltinArrayLength
		}},
		{"comprehension over ranges from input", pairsFromInput, 100000, func(err error) bool {
			var mbe *policy.MemoryBudgetError
			return errors.As(err, &mbe)
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			big := policy.Policy{Name: "big", Rego: tc.rego, Parameters: map[string]any{"n": tc.n}}
			e := mustEngine(t, policy.Options{MemoryBudget: budget, EvalTimeout: time.Minute}, big, alwaysViolates("other", "still served"))
			review := mustReview(t, policy.OperationCreate, nodePool("np", nil, nil), nil)

			watch := watchHeap()
			vs, err := e.Evaluate(context.Background(), review)
			growth := watch.stop()
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("heap grew by at most %.1f MiB (budget %d MiB)", float64(growth)/(1<<20), budget>>20)
			if growth > budget+slack {
				t.Errorf("heap grew by %d MiB, want at most the %d MiB budget plus %d MiB", growth>>20, budget>>20, slack>>20)
			}
			if len(vs) != 2 || vs[0].Policy != "big" || !vs[0].IsError() || !tc.stopped(vs[0].Err) {
				t.Fatalf("results = %+v, want big stopped, then other", vs)
			}
			if policy.NewVerdict(vs).Allowed(true) {
				t.Error("the stopped Deny policy did not deny")
			}
			if vs[1].IsError() || vs[1].Message != "still served" {
				t.Errorf("other = %+v, want its violation", vs[1])
			}

			// Afterwards the engine serves as before, including the policy that was stopped.
			big.Parameters = map[string]any{"n": 10}
			if err := e.UpsertPolicy(context.Background(), big); err != nil {
				t.Fatal(err)
			}
			for range 3 {
				vs, err = e.Evaluate(context.Background(), review)
				if err != nil {
					t.Fatal(err)
				}
				if len(vs) != 1 || vs[0].Policy != "other" || vs[0].IsError() {
					t.Fatalf("after the stop: results = %+v, want only other's violation", vs)
				}
			}
		})
	}
}
