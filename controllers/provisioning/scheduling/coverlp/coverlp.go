// Package coverlp solves covering linear programs: the least price of real-valued counts of
// instance types whose resources together cover a demand. The scheduler uses it to value
// resources when it packs pods (the dual prices), and benchmarks use it as a lower bound on the
// price of any set of nodes that can hold the pods.
//
// It is pure arithmetic on its arguments: no Kubernetes types, no state between calls.
package coverlp

import (
	"math"
	"slices"
)

// Solution is the optimum of a covering LP.
type Solution struct {
	// Value is the least price; +Inf when some demanded resource is offered by no column.
	Value float64
	// Counts are how many of each column (real-valued) the optimum takes; nil when infeasible.
	Counts []float64
	// Prices are the dual prices: what one more unit of each resource of the demand would add
	// to Value (0 for a resource without demand); nil when infeasible. No column is worth more at
	// these prices than it costs, and the demand at these prices is worth Value.
	Prices []float64
}

// eps is the tolerance of the pivoting rules on the scaled problem (demand 1 in each row, prices
// at most 1).
const eps = 1e-11

// Solve minimises Σ_j price[j]·x[j] subject to Σ_j cols[j][r]·x[j] ≥ demand[r] for every
// resource r, and x ≥ 0. cols[j] lists what column j offers of each resource (as many entries as
// demand); prices must not be negative. Resources without demand (≤ 0) are left out.
//
// It runs the revised simplex method, first minimising artificial variables to find a feasible
// basis, then the price, with Bland's rule (so it cannot cycle). The basis has one column per
// demanded resource, so an iteration costs time linear in the number of columns.
func Solve(cols [][]float64, price []float64, demand []float64) Solution {
	var rows []int
	for r, d := range demand {
		if d > 0 {
			rows = append(rows, r)
		}
	}
	n, m := len(cols), len(rows)
	if m == 0 {
		return Solution{Counts: make([]float64, n), Prices: make([]float64, len(demand))}
	}
	scale := 0.0
	for _, p := range price {
		scale = math.Max(scale, p)
	}
	if scale == 0 {
		scale = 1
	}
	lp := &simplex{n: n, m: m, a: make([]float64, n*m), c: make([]float64, n)}
	for j, col := range cols {
		for i, r := range rows {
			lp.a[j*m+i] = col[r] / demand[r]
		}
		lp.c[j] = price[j] / scale
	}
	if !lp.solve() {
		return Solution{Value: math.Inf(1)}
	}
	out := Solution{Counts: make([]float64, n), Prices: make([]float64, len(demand))}
	for i, k := range lp.basis {
		if k < n {
			out.Counts[k] = math.Max(lp.xb[i], 0)
		}
	}
	for j := range n {
		out.Value += out.Counts[j] * price[j]
	}
	y := lp.duals(lp.phaseCost)
	for i, r := range rows {
		out.Prices[r] = y[i] * scale / demand[r]
	}
	return out
}

// simplex is the scaled problem: min c·x subject to A·x − s = 1, x, s ≥ 0, with artificial
// variables for the first phase. Variables are numbered: columns 0..n-1, surpluses n..n+m-1
// (column −e_i), artificials n+m..n+2m-1 (column e_i).
type simplex struct {
	n, m  int
	a     []float64 // n×m, column-major by variable: a[j*m+i]
	c     []float64
	basis []int
	binv  []float64 // m×m, row-major
	xb    []float64
	phase int
}

func (lp *simplex) isArtificial(k int) bool { return k >= lp.n+lp.m }

// column writes variable k's column into out.
func (lp *simplex) column(k int, out []float64) {
	clear(out)
	switch {
	case k < lp.n:
		copy(out, lp.a[k*lp.m:(k+1)*lp.m])
	case k < lp.n+lp.m:
		out[k-lp.n] = -1
	default:
		out[k-lp.n-lp.m] = 1
	}
}

// phaseCost is the cost of variable k in the current phase.
func (lp *simplex) phaseCost(k int) float64 {
	if lp.phase == 1 {
		if lp.isArtificial(k) {
			return 1
		}
		return 0
	}
	if k < lp.n {
		return lp.c[k]
	}
	return 0
}

// duals returns c_B·B⁻¹ for the cost function.
func (lp *simplex) duals(cost func(int) float64) []float64 {
	y := make([]float64, lp.m)
	for bi, k := range lp.basis {
		if ck := cost(k); ck != 0 {
			for i := range lp.m {
				y[i] += ck * lp.binv[bi*lp.m+i]
			}
		}
	}
	return y
}

// solve runs both phases and reports whether the problem is feasible.
func (lp *simplex) solve() bool {
	m := lp.m
	lp.basis = make([]int, m)
	lp.binv = make([]float64, m*m)
	lp.xb = make([]float64, m)
	for i := range m {
		lp.basis[i] = lp.n + m + i
		lp.binv[i*m+i] = 1
		lp.xb[i] = 1
	}
	lp.phase = 1
	lp.iterate()
	infeasibility := 0.0
	for i, k := range lp.basis {
		if lp.isArtificial(k) {
			infeasibility += lp.xb[i]
		}
	}
	if infeasibility > 1e-9 {
		return false
	}
	lp.evictArtificials()
	lp.phase = 2
	lp.iterate()
	return true
}

// iterate pivots until no variable has a negative reduced cost. Artificial variables never enter
// in the second phase.
func (lp *simplex) iterate() {
	m := lp.m
	col := make([]float64, m)
	w := make([]float64, m)
	inBasis := make([]bool, lp.n+2*m)
	for _, k := range lp.basis {
		inBasis[k] = true
	}
	last := lp.n + 2*m
	if lp.phase == 2 {
		last = lp.n + m
	}
	for {
		y := lp.duals(lp.phaseCost)
		enter := -1
		for k := 0; k < last && enter < 0; k++ {
			if inBasis[k] {
				continue
			}
			lp.column(k, col)
			d := lp.phaseCost(k)
			for i := range m {
				d -= y[i] * col[i]
			}
			if d < -eps {
				enter = k
			}
		}
		if enter < 0 {
			return
		}
		lp.column(enter, col)
		lp.direction(col, w)
		leave := -1
		best := math.Inf(1)
		for i := range m {
			if w[i] <= eps {
				continue
			}
			ratio := lp.xb[i] / w[i]
			if ratio < best-eps || (ratio <= best+eps && leave >= 0 && lp.basis[i] < lp.basis[leave]) {
				best, leave = ratio, i
			}
		}
		if leave < 0 {
			return // unbounded; cannot happen with costs that are not negative
		}
		inBasis[lp.basis[leave]], inBasis[enter] = false, true
		lp.pivot(leave, enter, w)
	}
}

// direction computes w = B⁻¹·col.
func (lp *simplex) direction(col, w []float64) {
	m := lp.m
	for i := range m {
		s := 0.0
		for k := range m {
			s += lp.binv[i*m+k] * col[k]
		}
		w[i] = s
	}
}

// pivot makes variable enter basic in row leave, w being its column in the current basis.
func (lp *simplex) pivot(leave, enter int, w []float64) {
	m := lp.m
	p := w[leave]
	row := lp.binv[leave*m : (leave+1)*m]
	for k := range row {
		row[k] /= p
	}
	lp.xb[leave] /= p
	for i := range m {
		if i == leave || w[i] == 0 {
			continue
		}
		f := w[i]
		for k := range m {
			lp.binv[i*m+k] -= f * row[k]
		}
		lp.xb[i] -= f * lp.xb[leave]
	}
	lp.basis[leave] = enter
}

// evictArtificials replaces the artificial variables left in the basis at zero by other
// variables, without changing the solution.
func (lp *simplex) evictArtificials() {
	m := lp.m
	col := make([]float64, m)
	w := make([]float64, m)
	for i := range m {
		if !lp.isArtificial(lp.basis[i]) {
			continue
		}
		for k := 0; k < lp.n+m; k++ {
			if slices.Contains(lp.basis, k) {
				continue
			}
			lp.column(k, col)
			lp.direction(col, w)
			if math.Abs(w[i]) > 1e-9 {
				lp.pivot(i, k, w)
				break
			}
		}
	}
}
