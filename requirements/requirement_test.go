package requirements

import (
	"math"
	"math/rand"
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// state is one label state of a node: a value, or absent.
type state struct {
	value   string
	present bool
}

func TestOperators(t *testing.T) {
	absent := state{}
	v := func(s string) state { return state{value: s, present: true} }
	tests := []struct {
		name   string
		op     corev1.NodeSelectorOperator
		values []string
		allow  []state
		deny   []state
	}{
		{"In", corev1.NodeSelectorOpIn, []string{"b", "a", "a"}, []state{v("a"), v("b")}, []state{v("c"), absent}},
		{"NotIn", corev1.NodeSelectorOpNotIn, []string{"a"}, []state{v("b"), absent}, []state{v("a")}},
		{"Exists", corev1.NodeSelectorOpExists, nil, []state{v("a"), v("")}, []state{absent}},
		{"DoesNotExist", corev1.NodeSelectorOpDoesNotExist, nil, []state{absent}, []state{v("a"), v("")}},
		{"Gt", corev1.NodeSelectorOpGt, []string{"3"}, []state{v("4"), v("100")}, []state{v("3"), v("2"), v("x"), absent}},
		{"Lt", corev1.NodeSelectorOpLt, []string{"3"}, []state{v("2"), v("-7")}, []state{v("3"), v("x"), absent}},
		{"Gte", karpv1.NodeSelectorOpGte, []string{"3"}, []state{v("3"), v("4")}, []state{v("2"), absent}},
		{"Lte", karpv1.NodeSelectorOpLte, []string{"3"}, []state{v("3"), v("0")}, []state{v("4"), absent}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := NewRequirement("k", tt.op, tt.values...)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tt.allow {
				if !r.Matches(s.value, s.present) {
					t.Errorf("%s should allow %+v", r, s)
				}
			}
			for _, s := range tt.deny {
				if r.Matches(s.value, s.present) {
					t.Errorf("%s should deny %+v", r, s)
				}
			}
		})
	}
}

func TestNewRequirementErrors(t *testing.T) {
	tests := []struct {
		op     corev1.NodeSelectorOperator
		values []string
		want   string
	}{
		{corev1.NodeSelectorOpIn, nil, "requirement k In: give at least one value"},
		{corev1.NodeSelectorOpExists, []string{"a"}, `requirement k Exists: takes no values, got ["a"]`},
		{corev1.NodeSelectorOpGt, []string{"1", "2"}, `requirement k Gt: give exactly one integer value, got ["1" "2"]`},
		{corev1.NodeSelectorOpLt, []string{"x"}, `requirement k Lt: value "x" is not an integer`},
		{"Near", nil, `requirement k: unknown operator "Near" (use In, NotIn, Exists, DoesNotExist, Gt, Lt, Gte or Lte)`},
	}
	for _, tt := range tests {
		t.Run(string(tt.op), func(t *testing.T) {
			_, err := NewRequirement("k", tt.op, tt.values...)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
		})
	}
}

func TestNormalisesBetaLabels(t *testing.T) {
	tests := map[string]string{
		"beta.kubernetes.io/arch":                  "kubernetes.io/arch",
		"beta.kubernetes.io/os":                    "kubernetes.io/os",
		"beta.kubernetes.io/instance-type":         "node.kubernetes.io/instance-type",
		"failure-domain.beta.kubernetes.io/zone":   "topology.kubernetes.io/zone",
		"failure-domain.beta.kubernetes.io/region": "topology.kubernetes.io/region",
		"example.com/team":                         "example.com/team",
	}
	for beta, stable := range tests {
		t.Run(beta, func(t *testing.T) {
			r, err := NewRequirement(beta, corev1.NodeSelectorOpIn, "x")
			if err != nil {
				t.Fatal(err)
			}
			if r.Key() != stable {
				t.Errorf("key %q, want %q", r.Key(), stable)
			}
			node := FromLabels(map[string]string{stable: "x"})
			pod := FromLabels(map[string]string{beta: "y"})
			if err := node.Compatible(pod); err == nil {
				t.Errorf("pod %s should conflict with node %s after normalisation", pod, node)
			}
			if !FromLabels(map[string]string{beta: "x"}).Has(stable) {
				t.Errorf("FromLabels did not normalise %s", beta)
			}
		})
	}
}

func TestIntersect(t *testing.T) {
	mk := func(op corev1.NodeSelectorOperator, values ...string) Requirement {
		r, err := NewRequirement("k", op, values...)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	tests := []struct {
		name       string
		a, b       Requirement
		want       string
		intersects bool
	}{
		{"in-in overlap", mk("In", "a", "b"), mk("In", "b", "c"), "k In [b]", true},
		{"in-in disjoint", mk("In", "a"), mk("In", "b"), "k In []", false},
		{"in-notin", mk("In", "a", "b"), mk("NotIn", "a"), "k In [b]", true},
		{"in-notin all excluded", mk("In", "a"), mk("NotIn", "a"), "k In []", false},
		{"notin-notin", mk("NotIn", "a"), mk("NotIn", "b"), "k NotIn [a b]", true},
		{"exists-doesnotexist", mk("Exists"), mk("DoesNotExist"), "k In []", false},
		{"notin-doesnotexist", mk("NotIn", "a"), mk("DoesNotExist"), "k DoesNotExist", true},
		{"in-doesnotexist", mk("In", "a"), mk("DoesNotExist"), "k In []", false},
		{"exists-in", mk("Exists"), mk("In", "a"), "k In [a]", true},
		{"gt-lt range", mk("Gt", "2"), mk("Lt", "5"), "k Gt 2 Lt 5", true},
		{"gt-lt empty range", mk("Gt", "4"), mk("Lt", "5"), "k Gt 4 Lt 5", false},
		{"gte-lte single", mk("Gte", "4"), mk("Lte", "4"), "k Gt 3 Lt 5", true},
		{"gt-in filters", mk("Gt", "2"), mk("In", "1", "3", "x"), "k In [3]", true},
		{"gt-lt-notin excludes all", mk("Gt", "2").Intersect(mk("Lt", "5")), mk("NotIn", "3", "4"), "k Exists NotIn [3 4] Gt 2 Lt 5", false},
		{"gt-notin keeps", mk("Gt", "2"), mk("NotIn", "3", "1"), "k Exists NotIn [3] Gt 2", true},
		{"gt-doesnotexist", mk("Gt", "2"), mk("DoesNotExist"), "k In []", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.a.Intersect(tt.b)
			if got.String() != tt.want {
				t.Errorf("Intersect = %s, want %s", got, tt.want)
			}
			if tt.a.Intersects(tt.b) != tt.intersects || tt.b.Intersects(tt.a) != tt.intersects {
				t.Errorf("Intersects = %v, want %v", tt.a.Intersects(tt.b), tt.intersects)
			}
			if got.IsEmpty() == tt.intersects {
				t.Errorf("IsEmpty = %v, want %v", got.IsEmpty(), !tt.intersects)
			}
		})
	}
}

// universe holds label states that witness every requirement the random generator builds: the
// integers -1..12, strings, integers far outside any bound, and the absent label.
func universe() []state {
	var out []state
	for i := -1; i <= 12; i++ {
		out = append(out, state{strconv.Itoa(i), true})
	}
	for _, s := range []string{"a", "b", "c", "zzz", "1000", "-1000"} {
		out = append(out, state{s, true})
	}
	return append(out, state{})
}

func randomRequirement(rng *rand.Rand) Requirement {
	pool := []string{"a", "b", "c", "1", "2", "3", "5", "8"}
	pick := func() []string {
		var out []string
		for _, v := range pool {
			if rng.Intn(3) == 0 {
				out = append(out, v)
			}
		}
		return out
	}
	var r Requirement
	switch rng.Intn(8) {
	case 0:
		r = In("k", pick()...)
	case 1:
		r = NotIn("k", pick()...)
	case 2:
		r = Exists("k")
	case 3:
		r = DoesNotExist("k")
	case 4:
		r, _ = NewRequirement("k", corev1.NodeSelectorOpGt, strconv.Itoa(rng.Intn(11)))
	case 5:
		r, _ = NewRequirement("k", corev1.NodeSelectorOpLt, strconv.Itoa(rng.Intn(11)))
	case 6:
		r, _ = NewRequirement("k", karpv1.NodeSelectorOpGte, strconv.Itoa(rng.Intn(11)))
	default:
		r, _ = NewRequirement("k", karpv1.NodeSelectorOpLte, strconv.Itoa(rng.Intn(11)))
	}
	if rng.Intn(4) == 0 {
		r = r.Intersect(randomRequirement(rng))
	}
	return r
}

// TestAlgebraAgainstStates checks Intersect, Intersects, Union, IsEmpty and the node selector
// form against brute force over label states that witness every generated requirement.
func TestAlgebraAgainstStates(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	states := universe()
	for i := 0; i < 3000; i++ {
		a, b := randomRequirement(rng), randomRequirement(rng)
		inter, union := a.Intersect(b), a.Union(b)
		anyBoth, anyA := false, false
		for _, s := range states {
			ma, mb := a.Matches(s.value, s.present), b.Matches(s.value, s.present)
			if got := inter.Matches(s.value, s.present); got != (ma && mb) {
				t.Fatalf("(%s) ∩ (%s) = %s: state %+v got %v", a, b, inter, s, got)
			}
			if (ma || mb) && !union.Matches(s.value, s.present) {
				t.Fatalf("(%s) ∪ (%s) = %s misses state %+v", a, b, union, s)
			}
			if !a.bounded() && !b.bounded() && union.Matches(s.value, s.present) != (ma || mb) {
				t.Fatalf("(%s) ∪ (%s) = %s: state %+v should be exact", a, b, union, s)
			}
			anyBoth = anyBoth || (ma && mb)
			anyA = anyA || ma
		}
		if a.Intersects(b) != anyBoth {
			t.Fatalf("(%s).Intersects(%s) = %v, brute force %v", a, b, a.Intersects(b), anyBoth)
		}
		if inter.IsEmpty() == anyBoth {
			t.Fatalf("(%s).IsEmpty() = %v, brute force non-empty %v", inter, inter.IsEmpty(), anyBoth)
		}
		if a.IsEmpty() == anyA {
			t.Fatalf("(%s).IsEmpty() = %v, brute force non-empty %v", a, a.IsEmpty(), anyA)
		}
		// An empty set has no valid node selector form (In needs a value); neither has a value set
		// or bounds united with the absent label.
		expressible := !a.IsEmpty() && !(a.absent && (a.bounded() || (!a.complement && len(a.values) > 0)))
		if expressible {
			back, err := FromNodeSelectorRequirements(a.NodeSelectorRequirements()...)
			if err != nil {
				t.Fatalf("%s: %v", a, err)
			}
			r, ok := back.Get("k")
			for _, s := range states {
				got := !ok || r.Matches(s.value, s.present)
				if got != a.Matches(s.value, s.present) {
					t.Fatalf("%s round-trips to %v, which differs on %+v", a, a.NodeSelectorRequirements(), s)
				}
			}
		}
	}
}

func TestLenAndSingle(t *testing.T) {
	gt, _ := NewRequirement("k", corev1.NodeSelectorOpGt, "2")
	lt, _ := NewRequirement("k", corev1.NodeSelectorOpLt, "8")
	tests := []struct {
		r      Requirement
		len    int
		single string
	}{
		{In("k", "a", "b"), 2, ""},
		{In("k", "a"), 1, "a"},
		{gt.Intersect(lt).Intersect(NotIn("k", "3")), 4, ""},
		{gt.Intersect(In("k", "5")), 1, "5"},
		{DoesNotExist("k"), 0, ""},
	}
	for _, tt := range tests {
		if got := tt.r.Len(); got != tt.len {
			t.Errorf("%s: Len %d, want %d", tt.r, got, tt.len)
		}
		got, ok := tt.r.Single()
		if got != tt.single || ok != (tt.single != "") {
			t.Errorf("%s: Single %q %v, want %q", tt.r, got, ok, tt.single)
		}
	}
	if Exists("k").Len() <= 1<<40 {
		t.Errorf("Exists should be unbounded")
	}
}

// TestHalfBoundedRangesEndAtInt64 checks that a bound on one side only still ends at the int64
// range, since bounded label values must parse as int64: Gt of the largest int64 allows nothing.
func TestHalfBoundedRangesEndAtInt64(t *testing.T) {
	maxInt, minInt := strconv.FormatInt(math.MaxInt64, 10), strconv.FormatInt(math.MinInt64, 10)
	req := func(op corev1.NodeSelectorOperator, v string) Requirement {
		r, err := NewRequirement("k", op, v)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	tests := []struct {
		name  string
		a, b  Requirement
		empty bool
	}{
		{"Gt max", req(corev1.NodeSelectorOpGt, maxInt), Exists("k"), true},
		{"Gte max", req(karpv1.NodeSelectorOpGte, maxInt), Exists("k"), false},
		{"Gte max without max", req(karpv1.NodeSelectorOpGte, maxInt), NotIn("k", maxInt), true},
		{"Lt min", req(corev1.NodeSelectorOpLt, minInt), Exists("k"), true},
		{"Lte min without min", req(karpv1.NodeSelectorOpLte, minInt), NotIn("k", minInt), true},
		{"Gt large leaves many", req(corev1.NodeSelectorOpGt, "10"), NotIn("k", "11", "12"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := tt.a.Intersect(tt.b)
			if in.IsEmpty() != tt.empty {
				t.Errorf("%s: IsEmpty %v, want %v (Len %d)", in, in.IsEmpty(), tt.empty, in.Len())
			}
			if tt.a.Intersects(tt.b) == tt.empty {
				t.Errorf("Intersects(%s, %s) = %v, want %v", tt.a, tt.b, !tt.empty, !tt.empty)
			}
		})
	}
}
