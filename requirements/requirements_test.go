package requirements

import (
	"errors"
	"maps"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

func mustReqs(t *testing.T, reqs ...corev1.NodeSelectorRequirement) Requirements {
	t.Helper()
	rs, err := FromNodeSelectorRequirements(reqs...)
	if err != nil {
		t.Fatal(err)
	}
	return rs
}

func nsr(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

func TestCompatible(t *testing.T) {
	node := mustReqs(t,
		nsr(karpv1.LabelArch, "In", "amd64"),
		nsr(karpv1.LabelTopologyZone, "In", "z1", "z2"),
		nsr("example.com/gen", "In", "5", "6"),
	)
	tests := []struct {
		name string
		pod  Requirements
		want string // "" means compatible
	}{
		{"empty pod", Requirements{}, ""},
		{"arch conflict", mustReqs(t, nsr("beta.kubernetes.io/arch", "In", "arm64")),
			"incompatible requirement kubernetes.io/arch In [arm64] vs [amd64]"},
		{"zone overlap", mustReqs(t, nsr(karpv1.LabelTopologyZone, "In", "z2", "z3")), ""},
		{"zone NotIn all", mustReqs(t, nsr(karpv1.LabelTopologyZone, "NotIn", "z1", "z2")),
			"incompatible requirement topology.kubernetes.io/zone NotIn [z1 z2] vs [z1 z2]"},
		{"gt satisfied", mustReqs(t, nsr("example.com/gen", "Gt", "5")), ""},
		{"lt unsatisfied", mustReqs(t, nsr("example.com/gen", "Lt", "5")),
			"incompatible requirement example.com/gen Lt 5 vs [5 6]"},
		{"undefined label required", mustReqs(t, nsr("example.com/team", "In", "a")),
			"incompatible requirement example.com/team In [a] vs label not defined"},
		{"undefined label Exists", mustReqs(t, nsr("example.com/team", "Exists")),
			"incompatible requirement example.com/team Exists vs label not defined"},
		{"undefined label NotIn", mustReqs(t, nsr("example.com/team", "NotIn", "a")), ""},
		{"undefined label DoesNotExist", mustReqs(t, nsr("example.com/team", "DoesNotExist")), ""},
		{"defined label DoesNotExist", mustReqs(t, nsr(karpv1.LabelArch, "DoesNotExist")),
			"incompatible requirement kubernetes.io/arch DoesNotExist vs [amd64]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := node.Compatible(tt.pod)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("want compatible, got %v", err)
			case tt.want != "" && (err == nil || err.Error() != tt.want):
				t.Fatalf("got %v, want %q", err, tt.want)
			}
			var c *Conflict
			if err != nil && !errors.As(err, &c) {
				t.Fatalf("error %T is not a *Conflict", err)
			}
		})
	}
}

func TestIntersectsIgnoresOneSidedKeys(t *testing.T) {
	a := mustReqs(t, nsr("a", "In", "1"), nsr("shared", "In", "x", "y"))
	b := mustReqs(t, nsr("b", "In", "2"), nsr("shared", "In", "y"))
	if err := a.Intersects(b); err != nil {
		t.Fatalf("want intersecting, got %v", err)
	}
	c := mustReqs(t, nsr("shared", "In", "z"))
	err := a.Intersects(c)
	if err == nil || err.Error() != "incompatible requirement shared In [z] vs [x y]" {
		t.Fatalf("got %v", err)
	}
	// The small-argument path and the merge path agree.
	big := mustReqs(t, nsr("a", "In", "1"), nsr("b", "In", "1"), nsr("c", "In", "1"), nsr("d", "In", "1"),
		nsr("e", "In", "1"), nsr("shared", "In", "x"))
	for _, other := range []Requirements{b, c, a} {
		_, ok1 := big.FirstConflict(other)
		_, ok2 := other.FirstConflict(big)
		if ok1 != ok2 {
			t.Errorf("FirstConflict not symmetric for %s", other)
		}
	}
}

func TestAddDoesNotAlias(t *testing.T) {
	base := mustReqs(t, nsr("zone", "In", "a", "b"), nsr("arch", "In", "amd64"))
	copyOf := base
	if !copyOf.Add(In("zone", "a")) {
		t.Fatal("Add should report a change")
	}
	if got := base.String(); got != "arch In [amd64], zone In [a b]" {
		t.Fatalf("base changed through a copy: %s", got)
	}
	if got := copyOf.String(); got != "arch In [amd64], zone In [a]" {
		t.Fatalf("copy = %s", got)
	}
	if copyOf.Add(In("zone", "a", "b")) {
		t.Fatal("Add of a superset should not change the set")
	}
	if !copyOf.Add(Exists("new")) || copyOf.String() != "arch In [amd64], new Exists, zone In [a]" {
		t.Fatalf("insert: %s", copyOf)
	}
	if base.Len() != 2 {
		t.Fatalf("base grew to %d", base.Len())
	}
}

func TestIntersectSets(t *testing.T) {
	a := mustReqs(t, nsr("a", "In", "1", "2"), nsr("c", "Exists"))
	b := mustReqs(t, nsr("a", "In", "2", "3"), nsr("b", "DoesNotExist"))
	if got := a.Intersect(b).String(); got != "a In [2], b DoesNotExist, c Exists" {
		t.Fatalf("got %s", got)
	}
	if !a.Intersect(b).Equal(b.Intersect(a)) {
		t.Fatal("Intersect is not commutative")
	}
}

func TestLabels(t *testing.T) {
	rs := mustReqs(t, nsr("one", "In", "x"), nsr("two", "In", "x", "y"), nsr("gone", "DoesNotExist"), nsr("any", "Exists"))
	want := map[string]string{"one": "x"}
	if got := rs.Labels(); !maps.Equal(got, want) {
		t.Fatalf("Labels = %v, want %v", got, want)
	}
}

func TestMinValues(t *testing.T) {
	rs, err := FromNodeSelectorRequirementsWithMinValues(
		karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelInstanceType, Operator: "In", Values: []string{"a", "b", "c"}, MinValues: ptr.To(2)},
		karpv1.NodeSelectorRequirementWithMinValues{Key: karpv1.LabelArch, Operator: "In", Values: []string{"amd64"}},
	)
	if err != nil {
		t.Fatal(err)
	}
	if !rs.HasMinValues() {
		t.Fatal("minValues lost")
	}
	it, _ := rs.Get(karpv1.LabelInstanceType)
	if it.MinValues() != 2 {
		t.Fatalf("minValues %d", it.MinValues())
	}
	// Intersections keep the larger minValues.
	if got := it.Intersect(In(karpv1.LabelInstanceType, "a", "b").WithMinValues(1)).MinValues(); got != 2 {
		t.Fatalf("intersect minValues %d", got)
	}
	out := rs.NodeSelectorRequirements()
	if len(out) != 2 || out[1].MinValues == nil || *out[1].MinValues != 2 || out[0].MinValues != nil {
		t.Fatalf("NodeSelectorRequirements lost minValues: %+v", out)
	}
	errs := []struct {
		req  karpv1.NodeSelectorRequirementWithMinValues
		want string
	}{
		{karpv1.NodeSelectorRequirementWithMinValues{Key: "k", Operator: "In", Values: []string{"a"}, MinValues: ptr.To(2)},
			"requirement k: minValues 2 needs at least that many values, got 1"},
		{karpv1.NodeSelectorRequirementWithMinValues{Key: "k", Operator: "Exists", MinValues: ptr.To(0)},
			"requirement k: minValues must be at least 1, got 0"},
	}
	for _, tt := range errs {
		if _, err := FromNodeSelectorRequirementsWithMinValues(tt.req); err == nil || err.Error() != tt.want {
			t.Errorf("got %v, want %q", err, tt.want)
		}
	}
}

func TestNodeSelectorRequirementsSkip(t *testing.T) {
	rs := mustReqs(t, nsr(karpv1.LabelHostname, "In", "h"), nsr("b", "NotIn", "x"), nsr("c", "Exists"))
	got := rs.NodeSelectorRequirements(karpv1.LabelHostname)
	if len(got) != 2 || got[0].Key != "b" || got[0].Operator != "NotIn" || got[1].Operator != "Exists" {
		t.Fatalf("got %+v", got)
	}
}

func TestForPod(t *testing.T) {
	term := func(reqs ...corev1.NodeSelectorRequirement) corev1.NodeSelectorTerm {
		return corev1.NodeSelectorTerm{MatchExpressions: reqs}
	}
	withAffinity := func(terms ...corev1.NodeSelectorTerm) *corev1.Affinity {
		return &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
			RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms},
		}}
	}
	tests := []struct {
		name     string
		selector map[string]string
		affinity *corev1.Affinity
		want     []string
		err      string
	}{
		{"nothing", nil, nil, []string{""}, ""},
		{"selector only", map[string]string{"beta.kubernetes.io/os": "linux"}, nil, []string{"kubernetes.io/os In [linux]"}, ""},
		{"terms are alternatives", map[string]string{"a": "1"},
			withAffinity(term(nsr("zone", "In", "z1")), term(), term(nsr("zone", "In", "z2"), nsr("a", "In", "1", "2"))),
			[]string{"a In [1], zone In [z1]", "a In [1], zone In [z2]"}, ""},
		{"no terms", nil, withAffinity(), nil, "pod default/p: spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution has no terms, so no node matches; add a term or remove it"},
		{"only empty terms", nil, withAffinity(term()), nil, "pod default/p: every required node affinity term is empty, so no node matches; give the terms matchExpressions"},
		{"bad term", nil, withAffinity(term(nsr("n", "Gt", "x"))), nil, `pod default/p: required node affinity term 0: requirement n Gt: value "x" is not an integer`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pod := &corev1.Pod{}
			pod.Namespace, pod.Name = "default", "p"
			pod.Spec.NodeSelector = tt.selector
			pod.Spec.Affinity = tt.affinity
			got, err := ForPod(pod)
			if tt.err != "" {
				if err == nil || err.Error() != tt.err {
					t.Fatalf("got %v, want %q", err, tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d alternatives, want %d", len(got), len(tt.want))
			}
			for i := range got {
				if got[i].String() != tt.want[i] {
					t.Errorf("alternative %d = %q, want %q", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestPreferencesForPod(t *testing.T) {
	pod := &corev1.Pod{}
	pod.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
			{Weight: 1, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{nsr("a", "In", "1")}}},
			{Weight: 50, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{nsr("b", "In", "1")}}},
			{Weight: 1, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{nsr("c", "In", "1")}}},
			{Weight: 9, Preference: corev1.NodeSelectorTerm{}},
		},
	}}
	got, err := PreferencesForPod(pod)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"b In [1]", "a In [1]", "c In [1]"}
	if len(got) != len(want) {
		t.Fatalf("got %d preferences", len(got))
	}
	for i := range want {
		if got[i].Requirements.String() != want[i] {
			t.Errorf("preference %d = %s, want %s", i, got[i].Requirements, want[i])
		}
	}
}

// BenchmarkCompatible measures the scheduler's most frequent check: a pod's few requirements
// against a NodeClaim's dozen.
func BenchmarkCompatible(b *testing.B) {
	node := New(In(karpv1.LabelArch, "amd64"), In(karpv1.LabelOS, "linux", "windows"), In(karpv1.LabelTopologyZone, "z1", "z2", "z3"),
		In(karpv1.CapacityTypeLabelKey, "spot", "on-demand"), In(karpv1.NodePoolLabelKey, "default"), In(karpv1.LabelHostname, "h-1"),
		In("integer", "1", "2", "3", "4"), In("size", "small", "large"), Exists("special"))
	pod := New(In(karpv1.LabelTopologyZone, "z2"), NotIn(karpv1.LabelArch, "arm64"))
	b.ReportAllocs()
	for b.Loop() {
		if err := node.Compatible(pod); err != nil {
			b.Fatal(err)
		}
	}
}

func TestHash(t *testing.T) {
	a := New(In("zone", "a", "b"), Exists("x"))
	b := New(Exists("x"), In("zone", "b", "a"))
	if a.Hash() != b.Hash() {
		t.Fatal("equal sets hash differently")
	}
	for _, other := range []Requirements{
		New(In("zone", "a"), Exists("x")),
		New(In("zone", "a", "b"), DoesNotExist("x")),
		New(In("zone", "ab"), Exists("x")),
		New(In("zone", "a", "b"), Exists("x").WithMinValues(2)),
		{},
	} {
		if other.Hash() == a.Hash() {
			t.Errorf("%s hashes like %s", other, a)
		}
	}
}
