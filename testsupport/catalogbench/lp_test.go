package catalogbench

import (
	"context"
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/requirements"
)

// col builds a column from whole units (they are stored in milli-units).
func col(name string, price float64, units ...float64) Column {
	c := Column{Name: name, Price: price}
	for _, u := range units {
		c.Alloc = append(c.Alloc, int64(u*1000))
	}
	return c
}

func milli(units ...float64) []float64 {
	out := make([]float64, len(units))
	for i, u := range units {
		out[i] = u * 1000
	}
	return out
}

// TestCoveringLP checks the LP of columns on small cases whose optimum is known (coverlp has the
// thorough tests).
func TestCoveringLP(t *testing.T) {
	for _, tc := range []struct {
		name   string
		cols   []Column
		demand []float64
		want   float64
	}{
		{"one type", []Column{col("a", 1, 2, 4, 10)}, milli(4, 4, 4), 2},
		// One of each covers (5, 5) for 2; either type alone needs 5 of itself.
		{"complementary", []Column{col("a", 1, 4, 1, 100), col("b", 1, 1, 4, 100)}, milli(5, 5, 1), 2},
		{"cheapest per cpu", []Column{col("a", 1, 2, 100, 100), col("b", 3, 8, 100, 100)}, milli(8, 1, 1), 3},
		{"a resource without demand is ignored", []Column{col("a", 1, 2, 0, 10)}, milli(4, 0, 2), 2},
		{"no demand", []Column{col("a", 1, 2, 4, 10)}, milli(0, 0, 0), 0},
		{"a demanded resource nobody offers", []Column{col("a", 1, 2, 4, 10, 0)}, milli(4, 4, 4, 1), math.Inf(1)},
		// Two GPU nodes bring 8 of the 16 cpus; one cpu node the rest.
		{"gpu dimension", []Column{col("cpu", 1, 8, 32, 50, 0), col("gpu", 5, 4, 16, 50, 1)}, milli(16, 32, 10, 2), 11},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := CoveringLP(tc.cols, tc.demand)
			if math.IsInf(tc.want, 1) {
				if !math.IsInf(got, 1) {
					t.Errorf("got %v, want +Inf", got)
				}
				return
			}
			if math.Abs(got-tc.want) > 1e-9 {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestCatalogBounds checks the bounds on the embedded catalog: the LP of a mix of pods lies
// between covering each resource alone with its cheapest type per unit and the cheapest covering
// by one type; for identical pods the exact optimum is at least the LP and at most one type's.
func TestCatalogBounds(t *testing.T) {
	np := &karpv1.NodePool{}
	np.Name = "default"
	np.Spec.Template.Spec.NodeClassRef = NodeClassRef()
	its, err := InstanceTypes(context.Background(), "us-east-1", np)
	if err != nil {
		t.Fatal(err)
	}
	reqs := requirements.New(
		requirements.In(karpv1.CapacityTypeLabelKey, karpv1.CapacityTypeSpot, karpv1.CapacityTypeOnDemand),
		requirements.In("karpenter.k8s.aws/instance-category", "c", "m", "r"),
	)
	resources := []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods}
	cols := Columns(its, reqs, resources)
	if len(cols) == 0 {
		t.Fatal("no columns")
	}
	for _, tc := range []struct {
		name   string
		pod    []int64
		n      int
		demand []float64
	}{
		{"inflate", []int64{1000, 0, 1000}, 10, nil},
		{"web", []int64{250, 512 << 20 * 1000, 1000}, 100, nil},
		{"mix", nil, 0, []float64{663350, 1309.65 * (1 << 30) * 1000, 1000 * 1000}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			demand := tc.demand
			if demand == nil {
				demand = make([]float64, len(tc.pod))
				for r, v := range tc.pod {
					demand[r] = float64(v) * float64(tc.n)
				}
			}
			lower, upper := SimpleBounds(cols, demand)
			lp := CoveringLP(cols, demand)
			t.Logf("%d columns; LP $%.4f/h within [$%.4f, $%.4f]", len(cols), lp, lower, upper)
			if lp < lower-1e-9 || lp > upper+1e-9 {
				t.Errorf("LP $%.4f/h outside [$%.4f, $%.4f]", lp, lower, upper)
			}
			if tc.pod == nil {
				return
			}
			opt, counts := IdenticalOptimum(cols, tc.pod, tc.n)
			t.Logf("optimum $%.4f/h: %v", opt, counts)
			if opt < lp-1e-9 {
				t.Errorf("optimum $%.4f/h below the LP $%.4f/h", opt, lp)
			}
		})
	}
}
