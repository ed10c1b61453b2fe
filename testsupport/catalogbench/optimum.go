package catalogbench

import "math"

// IdenticalOptimum returns the least price of whole nodes that hold n identical pods, each
// requesting pod (milli-units, in the columns' resources), and how many nodes of each column that
// takes (by column name). A node holds as many pods as fit its allocatable in every resource at
// once. It is exact when nothing but resources constrains the pods (no topology, no affinity): an
// unbounded covering knapsack solved by dynamic programming over the pod count, in time n times
// the number of columns. The price is +Inf when no column holds a pod.
func IdenticalOptimum(cols []Column, pod []int64, n int) (float64, map[string]int) {
	holds := make([]int, len(cols))
	for c, col := range cols {
		k := math.MaxInt
		for r, need := range pod {
			if need > 0 {
				k = min(k, int(col.Alloc[r]/need))
			}
		}
		holds[c] = k
	}
	// best[i] is the least price of nodes holding i pods; choice[i] the column of one of them.
	best := make([]float64, n+1)
	choice := make([]int, n+1)
	for i := 1; i <= n; i++ {
		best[i], choice[i] = math.Inf(1), -1
		for c, col := range cols {
			if holds[c] < 1 {
				continue
			}
			if p := col.Price + best[max(0, i-holds[c])]; p < best[i] {
				best[i], choice[i] = p, c
			}
		}
	}
	if math.IsInf(best[n], 1) {
		return best[n], nil
	}
	counts := map[string]int{}
	for i := n; i > 0; i = max(0, i-holds[choice[i]]) {
		counts[cols[choice[i]].Name]++
	}
	return best[n], counts
}
