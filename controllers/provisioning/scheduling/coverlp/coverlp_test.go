package coverlp

import (
	"math"
	"math/rand"
	"testing"
)

// TestSolve checks cases whose optimum is known.
func TestSolve(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cols   [][]float64
		price  []float64
		demand []float64
		want   float64
	}{
		{"one type", [][]float64{{2, 4, 10}}, []float64{1}, []float64{4, 4, 4}, 2},
		// One of each covers (5, 5) for 2; either type alone needs 5 of itself.
		{"complementary", [][]float64{{4, 1, 100}, {1, 4, 100}}, []float64{1, 1}, []float64{5, 5, 1}, 2},
		{"cheapest per cpu", [][]float64{{2, 100, 100}, {8, 100, 100}}, []float64{1, 3}, []float64{8, 1, 1}, 3},
		{"a resource without demand is left out", [][]float64{{2, 0, 10}}, []float64{1}, []float64{4, 0, 2}, 2},
		{"no demand", [][]float64{{2, 4, 10}}, []float64{1}, []float64{0, 0, 0}, 0},
		{"no columns", nil, nil, []float64{1}, math.Inf(1)},
		{"a demanded resource nobody offers", [][]float64{{2, 4, 10, 0}}, []float64{1}, []float64{4, 4, 4, 1}, math.Inf(1)},
		// Two GPU nodes bring 8 of the 16 cpus; one cpu node the rest.
		{"gpu dimension", [][]float64{{8, 32, 50, 0}, {4, 16, 50, 1}}, []float64{1, 5}, []float64{16, 32, 10, 2}, 11},
		{"a free column", [][]float64{{1, 0}, {0, 1}}, []float64{0, 2}, []float64{3, 1}, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Solve(tc.cols, tc.price, tc.demand)
			if math.IsInf(tc.want, 1) {
				if !math.IsInf(got.Value, 1) || got.Counts != nil {
					t.Errorf("got %+v, want an infeasible solution", got)
				}
				return
			}
			if math.Abs(got.Value-tc.want) > 1e-9 {
				t.Errorf("value %v, want %v", got.Value, tc.want)
			}
			checkSolution(t, tc.cols, tc.price, tc.demand, got)
		})
	}
}

// checkSolution checks that the counts cover the demand at the solution's value, and that the
// dual prices are feasible (no column worth more than its price) and value the demand at the
// same price (strong duality).
func checkSolution(t *testing.T, cols [][]float64, price, demand []float64, s Solution) {
	t.Helper()
	cost := 0.0
	for j := range cols {
		if s.Counts[j] < 0 {
			t.Fatalf("negative count %v", s.Counts)
		}
		cost += s.Counts[j] * price[j]
	}
	tol := 1e-7 * math.Max(1, s.Value)
	if math.Abs(cost-s.Value) > tol {
		t.Fatalf("counts %v cost %v, value %v", s.Counts, cost, s.Value)
	}
	worth := 0.0
	for r, d := range demand {
		covered := 0.0
		for j, c := range cols {
			covered += s.Counts[j] * c[r]
		}
		if d > 0 && covered < d*(1-1e-9) {
			t.Fatalf("counts %v cover %v of resource %d, want %v", s.Counts, covered, r, d)
		}
		if s.Prices[r] < -1e-12 {
			t.Fatalf("negative dual price %v", s.Prices)
		}
		worth += s.Prices[r] * math.Max(d, 0)
	}
	if math.Abs(worth-s.Value) > tol {
		t.Fatalf("the demand is worth %v at the dual prices %v, the value is %v", worth, s.Prices, s.Value)
	}
	for j, c := range cols {
		v := 0.0
		for r := range demand {
			v += s.Prices[r] * c[r]
		}
		if v > price[j]*(1+1e-7)+1e-12 {
			t.Fatalf("column %d is worth %v at the dual prices %v, more than its price %v", j, v, s.Prices, price[j])
		}
	}
}

// TestSolveMatchesBasisEnumeration compares the simplex with the enumeration of every basis on
// random instances of 3 and 4 resources, some of them infeasible or degenerate.
func TestSolveMatchesBasisEnumeration(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for _, m := range []int{3, 4} {
		for trial := range 300 {
			n := 1 + rng.Intn(14)
			cols := make([][]float64, n)
			price := make([]float64, n)
			for j := range cols {
				price[j] = 0.01 + float64(rng.Intn(100))/50
				cols[j] = make([]float64, m)
				for r := range m {
					if rng.Intn(6) > 0 {
						cols[j][r] = float64(rng.Intn(20)) // small integers: ties and degeneracy
					}
				}
			}
			demand := make([]float64, m)
			for r := range demand {
				demand[r] = float64(rng.Intn(200))
			}
			got := Solve(cols, price, demand)
			want := solveByBases(cols, price, demand)
			if math.IsInf(want, 1) != math.IsInf(got.Value, 1) || (!math.IsInf(want, 1) && math.Abs(got.Value-want) > 1e-7*math.Max(1, want)) {
				t.Fatalf("m=%d trial %d: simplex %v, bases %v (cols %v, prices %v, demand %v)", m, trial, got.Value, want, cols, price, demand)
			}
			if !math.IsInf(want, 1) {
				checkSolution(t, cols, price, demand, got)
			}
		}
	}
}

// solveByBases solves the LP by enumerating every basis of its standard form (the columns plus a
// surplus column per demanded resource, m of them at a time) and keeping the cheapest feasible
// basic solution; an optimal basic solution is one of them. It takes time C(n+m, m).
func solveByBases(cols [][]float64, price, demand []float64) float64 {
	var rows []int
	for r, d := range demand {
		if d > 0 {
			rows = append(rows, r)
		}
	}
	m := len(rows)
	if m == 0 {
		return 0
	}
	d := make([]float64, m)
	type column struct {
		a     []float64
		price float64
	}
	var all []column
	for j, c := range cols {
		a := make([]float64, m)
		for i, r := range rows {
			a[i] = c[r]
		}
		all = append(all, column{a, price[j]})
	}
	for i, r := range rows {
		d[i] = demand[r]
		a := make([]float64, m)
		a[i] = -1
		all = append(all, column{a: a})
	}
	best := math.Inf(1)
	pick := make([]int, m)
	var walk func(depth, from int)
	walk = func(depth, from int) {
		if depth == m {
			basis := make([][]float64, m)
			for i, k := range pick {
				basis[i] = all[k].a
			}
			x, ok := solveSquare(basis, d)
			if !ok {
				return
			}
			cost := 0.0
			for i, k := range pick {
				if x[i] < -1e-9 {
					return
				}
				cost += all[k].price * x[i]
			}
			best = math.Min(best, cost)
			return
		}
		for k := from; k < len(all); k++ {
			pick[depth] = k
			walk(depth+1, k+1)
		}
	}
	walk(0, 0)
	return best
}

// solveSquare solves Σ_i x_i·cols[i] = d by Gaussian elimination with partial pivoting; ok is
// false when the columns are (nearly) dependent.
func solveSquare(cols [][]float64, d []float64) ([]float64, bool) {
	m := len(d)
	a := make([][]float64, m) // rows: resources; columns: the basis, then d
	scale := 0.0
	for r := range m {
		a[r] = make([]float64, m+1)
		for i := range m {
			a[r][i] = cols[i][r]
			scale = math.Max(scale, math.Abs(cols[i][r]))
		}
		a[r][m] = d[r]
	}
	if scale == 0 {
		return nil, false
	}
	for c := range m {
		p := c
		for r := c + 1; r < m; r++ {
			if math.Abs(a[r][c]) > math.Abs(a[p][c]) {
				p = r
			}
		}
		if math.Abs(a[p][c]) <= 1e-12*scale {
			return nil, false
		}
		a[c], a[p] = a[p], a[c]
		for r := range m {
			if r == c {
				continue
			}
			f := a[r][c] / a[c][c]
			for k := c; k <= m; k++ {
				a[r][k] -= f * a[c][k]
			}
		}
	}
	x := make([]float64, m)
	for r := range m {
		x[r] = a[r][m] / a[r][r]
	}
	return x, true
}
