package planner

import (
	"fmt"
	"reflect"
	"slices"
	"testing"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// TestSingleNodeWorkersDecideInOrder checks that single-node consolidation finds the same command
// and notes the same reasons whatever the number of workers: nodes n1-n4 hold a pod pinned to
// them by hostname (each cannot go, and has no memory left for another pod) and sort first; n5
// and n6 each hold a small pod that fits on the other. Multi-node finds nothing in either order:
// the two small pods together fit nowhere but on a node of their type, which is no cheaper.
func TestSingleNodeWorkersDecideInOrder(t *testing.T) {
	f := newFixture()
	f.pool(nodePool("default"), itype("a", "4", "8Gi", 1.0))
	for i := 1; i <= 4; i++ {
		n := fmt.Sprintf("n%d", i)
		f.odNode(n, "default", "a", pod(n+"-pinned", "3", "7Gi", withNodeSelector(karpv1.LabelHostname, n)))
	}
	f.odNode("n5", "default", "a", pod("n5-small", "500m", "1536Mi"))
	f.odNode("n6", "default", "a", pod("n6-small", "500m", "1536Mi"))
	var first *Plan
	for _, workers := range []int{1, 2, 3, 4, 8} {
		t.Run(fmt.Sprintf("workers=%d", workers), func(t *testing.T) {
			pl := plan(t, newPlanner(Options{Workers: workers}), f.cluster())
			if pl.Command == nil {
				t.Fatalf("no command; verdicts %+v", pl.Verdicts)
			}
			if got := candidateNames(pl.Command); pl.Command.Type != TypeSingle || !slices.Equal(got, []string{"n5"}) {
				t.Fatalf("command %s of %v, want single-node of [n5]", pl.Command.Type, got)
			}
			for _, n := range []string{"n1", "n2", "n3", "n4"} {
				if v := verdictOf(t, pl, n); v.Reason != ReasonUnconsolidatable {
					t.Errorf("%s: verdict %+v, want %s", n, v, ReasonUnconsolidatable)
				}
			}
			if first == nil {
				first = pl
				return
			}
			if !reflect.DeepEqual(pl.Verdicts, first.Verdicts) {
				t.Errorf("verdicts with %d workers\n%+v\nwith 1\n%+v", workers, pl.Verdicts, first.Verdicts)
			}
		})
	}
}
