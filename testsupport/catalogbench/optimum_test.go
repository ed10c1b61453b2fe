package catalogbench

import (
	"maps"
	"math"
	"testing"
)

// TestIdenticalOptimum checks the knapsack on cases small enough to check by hand.
func TestIdenticalOptimum(t *testing.T) {
	for _, tc := range []struct {
		name       string
		cols       []Column
		pod        []int64
		n          int
		want       float64
		wantCounts map[string]int
	}{
		{"no pods", []Column{col("a", 1, 2, 4)}, []int64{1000, 1000}, 0, 0, map[string]int{}},
		{"one type", []Column{col("a", 1, 2, 4)}, []int64{1000, 1000}, 5, 3, map[string]int{"a": 3}},
		// Ten 1-cpu pods: a 7-pod node and a 3-pod one beat ten 1-pod nodes and two 7-pod ones.
		{"inflate", []Column{col("large", 0.0106, 1.9, 3), col("xlarge", 0.0218, 3.9, 7), col("2xlarge", 0.0362, 7.9, 15)},
			[]int64{1000, 0}, 10, 0.058, map[string]int{"2xlarge": 1, "xlarge": 1}},
		{"the pod fits nowhere", []Column{col("a", 1, 2, 4)}, []int64{3000, 1000}, 1, math.Inf(1), nil},
		{"memory binds", []Column{col("c", 1, 8, 16), col("r", 1.2, 8, 64)}, []int64{1000, 8000}, 8, 1.2, map[string]int{"r": 1}},
		{"the cheapest per pod is not always best", []Column{col("small", 1, 1, 1), col("big", 5.5, 8, 8)}, []int64{1000, 1000}, 10, 7.5, map[string]int{"big": 1, "small": 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, counts := IdenticalOptimum(tc.cols, tc.pod, tc.n)
			if math.IsInf(tc.want, 1) != math.IsInf(got, 1) || (!math.IsInf(got, 1) && math.Abs(got-tc.want) > 1e-9) {
				t.Errorf("price %v, want %v", got, tc.want)
			}
			if !maps.Equal(counts, tc.wantCounts) {
				t.Errorf("counts %v, want %v", counts, tc.wantCounts)
			}
		})
	}
}
