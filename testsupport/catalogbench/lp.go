package catalogbench

import (
	"cmp"
	"math"
	"slices"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/coverlp"
	"github.com/joiner-dev/joiner/requirements"
)

// Column is one instance type a NodePool allows, as the bounds see it: its allocatable amount of
// each resource of the bound, in milli-units (millicores, milli-bytes, milli-pods, ...), and the
// price of its cheapest available offering the NodePool allows.
type Column struct {
	// Name is the instance type's name.
	Name string
	// Alloc is the allocatable amount of each resource, in the order the resources were given.
	Alloc []int64
	// Price is in $/h.
	Price float64
}

// Columns returns a column per instance type of its compatible with reqs (the NodePool's
// requirements) through an available offering, measuring the given resources, cheapest first.
// Types that a single other type dominates (no cheaper, and no smaller in any resource) are left
// out: no optimum needs them.
func Columns(its []*cloudprovider.InstanceType, reqs requirements.Requirements, resources []corev1.ResourceName) []Column {
	var cols []Column
	for _, it := range its {
		if !it.CompatibleWith(reqs) {
			continue
		}
		o, ok := it.Offerings.CheapestCompatible(reqs)
		if !ok {
			continue
		}
		alloc := it.Allocatable()
		c := Column{Name: it.Name, Alloc: make([]int64, len(resources)), Price: o.Price}
		for r, name := range resources {
			q := alloc[name]
			c.Alloc[r] = q.MilliValue()
		}
		cols = append(cols, c)
	}
	slices.SortStableFunc(cols, func(a, b Column) int { return cmp.Or(cmp.Compare(a.Price, b.Price), cmp.Compare(a.Name, b.Name)) })
	dominates := func(a, b *Column) bool { // a makes b unnecessary
		if a.Price > b.Price {
			return false
		}
		for r := range a.Alloc {
			if a.Alloc[r] < b.Alloc[r] {
				return false
			}
		}
		return true
	}
	out := make([]Column, 0, len(cols))
	for i := range cols {
		dominated := false
		for j := range cols {
			// Of identical columns, the first is kept.
			if j != i && dominates(&cols[j], &cols[i]) && (j < i || !dominates(&cols[i], &cols[j])) {
				dominated = true
				break
			}
		}
		if !dominated {
			out = append(out, cols[i])
		}
	}
	return out
}

// PodRequests returns what the pod requests of each resource, in milli-units: the sum of its
// containers' requests plus its overhead. Init containers are not counted; the benchmark pods
// have none.
func PodRequests(pod *corev1.Pod, resources []corev1.ResourceName) []int64 {
	out := make([]int64, len(resources))
	for r, name := range resources {
		if name == corev1.ResourcePods {
			out[r] = 1000
			continue
		}
		for i := range pod.Spec.Containers {
			if q, ok := pod.Spec.Containers[i].Resources.Requests[name]; ok {
				out[r] += q.MilliValue()
			}
		}
		if q, ok := pod.Spec.Overhead[name]; ok {
			out[r] += q.MilliValue()
		}
	}
	return out
}

// Demand returns the pods' total requests of each resource, in milli-units.
func Demand(pods []*corev1.Pod, resources []corev1.ResourceName) []float64 {
	out := make([]float64, len(resources))
	for _, pod := range pods {
		for r, v := range PodRequests(pod, resources) {
			out[r] += float64(v)
		}
	}
	return out
}

// CoveringLP returns the least price of real-valued, nonnegative counts x of the columns whose
// allocatable resources together cover demand: min Σ price·x subject to Σ alloc·x ≥ demand for
// every resource at once. It is a lower bound on the price of any set of nodes that can hold pods
// with that total demand. It is +Inf when some demanded resource is offered by no column.
func CoveringLP(cols []Column, demand []float64) float64 {
	v, _ := CoveringLPSolution(cols, demand)
	return v
}

// CoveringLPSolution is CoveringLP that also returns an optimal solution: the count of each
// column (nil when the LP is infeasible).
func CoveringLPSolution(cols []Column, demand []float64) (float64, []float64) {
	alloc := make([][]float64, len(cols))
	price := make([]float64, len(cols))
	for j, c := range cols {
		alloc[j] = make([]float64, len(c.Alloc))
		for r, v := range c.Alloc {
			alloc[j][r] = float64(v)
		}
		price[j] = c.Price
	}
	sol := coverlp.Solve(alloc, price, demand)
	return sol.Value, sol.Counts
}

// SimpleBounds are bounds on the covering LP that hold for any covering, for tests of the LP: no
// less than covering each resource alone with its cheapest column per unit, no more than the
// cheapest covering by a single column.
func SimpleBounds(cols []Column, demand []float64) (lower, upper float64) {
	upper = math.Inf(1)
	for r := range demand {
		if demand[r] == 0 {
			continue
		}
		perUnit := math.Inf(1)
		for _, c := range cols {
			perUnit = math.Min(perUnit, c.Price/float64(c.Alloc[r]))
		}
		lower = math.Max(lower, demand[r]*perUnit)
	}
	for _, c := range cols {
		need := 0.0
		for r := range demand {
			need = math.Max(need, demand[r]/float64(c.Alloc[r]))
		}
		upper = math.Min(upper, c.Price*need)
	}
	return lower, upper
}
