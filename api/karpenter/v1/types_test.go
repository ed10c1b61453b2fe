package v1

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"
)

func TestTaintConversion(t *testing.T) {
	added := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	tests := []struct {
		name   string
		taints []Taint
		want   []corev1.Taint
	}{
		{name: "nil stays nil", taints: nil, want: nil},
		{name: "empty stays empty", taints: []Taint{}, want: []corev1.Taint{}},
		{
			name: "all fields carried",
			taints: []Taint{
				{Key: "nvidia.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule},
				{Key: "example.com/drain", Effect: corev1.TaintEffectNoExecute, TimeAdded: &added},
			},
			want: []corev1.Taint{
				{Key: "nvidia.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule},
				{Key: "example.com/drain", Effect: corev1.TaintEffectNoExecute, TimeAdded: &added},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := TaintsToCore(tt.taints)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("TaintsToCore = %#v, want %#v", got, tt.want)
			}
			back := TaintsFromCore(got)
			if !reflect.DeepEqual(back, tt.taints) {
				t.Errorf("TaintsFromCore(TaintsToCore(x)) = %#v, want %#v", back, tt.taints)
			}
		})
	}
}

// TestTaintJSONMatchesCore checks that Taint and corev1.Taint have the same JSON form.
func TestTaintJSONMatchesCore(t *testing.T) {
	added := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	tests := []Taint{
		{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule},
		{Key: "k", Value: "v", Effect: corev1.TaintEffectPreferNoSchedule, TimeAdded: &added},
	}
	for _, taint := range tests {
		t.Run(taint.String(), func(t *testing.T) {
			ours, err := json.Marshal(taint)
			if err != nil {
				t.Fatalf("Marshal Taint: %v", err)
			}
			core, err := json.Marshal(taint.ToCore())
			if err != nil {
				t.Fatalf("Marshal corev1.Taint: %v", err)
			}
			if string(ours) != string(core) {
				t.Errorf("Taint JSON %s differs from corev1.Taint JSON %s", ours, core)
			}
		})
	}
}

func TestTaintString(t *testing.T) {
	tests := []struct {
		taint Taint
		want  string
	}{
		{Taint{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}, "nvidia.com/gpu:NoSchedule"},
		{Taint{Key: "team", Value: "a", Effect: corev1.TaintEffectNoExecute}, "team=a:NoExecute"},
	}
	for _, tt := range tests {
		if got := tt.taint.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}

func TestNormalizedLabelKey(t *testing.T) {
	tests := []struct{ in, want string }{
		{"failure-domain.beta.kubernetes.io/zone", LabelTopologyZone},
		{"failure-domain.beta.kubernetes.io/region", LabelTopologyRegion},
		{"beta.kubernetes.io/instance-type", LabelInstanceType},
		{"beta.kubernetes.io/arch", LabelArch},
		{"beta.kubernetes.io/os", LabelOS},
		{"topology.kubernetes.io/zone", "topology.kubernetes.io/zone"},
		{"example.com/team", "example.com/team"},
	}
	for _, tt := range tests {
		if got := NormalizedLabelKey(tt.in); got != tt.want {
			t.Errorf("NormalizedLabelKey(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestWellKnownLabels(t *testing.T) {
	got := WellKnownLabels()
	for _, key := range []string{
		"karpenter.sh/nodepool", "karpenter.sh/capacity-type", "topology.kubernetes.io/zone",
		"topology.kubernetes.io/region", "node.kubernetes.io/instance-type", "kubernetes.io/arch",
		"kubernetes.io/os", "node.kubernetes.io/windows-build",
	} {
		if !got.Has(key) {
			t.Errorf("WellKnownLabels() lacks %q", key)
		}
	}
	if got.Has(LabelHostname) {
		t.Errorf("WellKnownLabels() contains the restricted %q", LabelHostname)
	}
	got.Insert("mutated")
	if WellKnownLabels().Has("mutated") {
		t.Errorf("WellKnownLabels() returned a shared set")
	}
}

func TestNodeClassLabelKey(t *testing.T) {
	ref := &NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"}
	if got, want := NodeClassLabelKey(ref.GroupKind()), "karpenter.k8s.aws/ec2nodeclass"; got != want {
		t.Errorf("NodeClassLabelKey = %q, want %q", got, want)
	}
}

func TestWellKnownTaints(t *testing.T) {
	tests := []struct {
		got  corev1.Taint
		want string
	}{
		{DisruptedNoScheduleTaint(), "karpenter.sh/disrupted:NoSchedule"},
		{UnregisteredNoExecuteTaint(), "karpenter.sh/unregistered:NoExecute"},
	}
	for _, tt := range tests {
		if got := tt.got.ToString(); got != tt.want {
			t.Errorf("taint = %q, want %q", got, tt.want)
		}
	}
}

func TestSchemeRegistersKinds(t *testing.T) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		t.Fatalf("AddToScheme: %v", err)
	}
	for _, kind := range []string{"NodePool", "NodePoolList", "NodeClaim", "NodeClaimList"} {
		gvk := schema.GroupVersionKind{Group: "karpenter.sh", Version: "v1", Kind: kind}
		if !s.Recognizes(gvk) {
			t.Errorf("scheme does not recognise %s", gvk)
		}
	}
	if got, want := Resource("nodepools").String(), "nodepools.karpenter.sh"; got != want {
		t.Errorf("Resource = %q, want %q", got, want)
	}
}

// TestNodePoolYAMLRoundTrip decodes a NodePool as users write it and checks that encoding it again
// gives the same document: NillableDurations verbatim ("1h30m", "Never"), no fields added or
// dropped. Fields of type metav1.Duration (budget duration, terminationGracePeriod) and quantities
// are written in canonical form by Go ("8h" becomes "8h0m0s"), so the documents use that form.
func TestNodePoolYAMLRoundTrip(t *testing.T) {
	tests := []struct {
		name string
		doc  string
	}{
		{name: "dynamic", doc: `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: default
spec:
  disruption:
    budgets:
    - duration: 8h0m0s
      nodes: "0"
      reasons:
      - Drifted
      schedule: 0 9 * * mon-fri
    consolidateAfter: 1h30m
    consolidationPolicy: WhenEmpty
  limits:
    cpu: "100"
  template:
    metadata:
      labels:
        team: a
    spec:
      expireAfter: Never
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
      requirements:
      - key: karpenter.sh/capacity-type
        minValues: 1
        operator: In
        values:
        - spot
      taints:
      - effect: NoSchedule
        key: nvidia.com/gpu
      terminationGracePeriod: 24h0m0s
  weight: 10
`},
		{name: "static", doc: `apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: static
spec:
  limits:
    nodes: "5"
  replicas: 3
  template:
    spec:
      expireAfter: 720h
      nodeClassRef:
        group: karpenter.k8s.aws
        kind: EC2NodeClass
        name: default
      requirements: []
`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var np NodePool
			if err := yaml.UnmarshalStrict([]byte(tt.doc), &np); err != nil {
				t.Fatalf("decode: %v", err)
			}
			out, err := yaml.Marshal(&np)
			if err != nil {
				t.Fatalf("encode: %v", err)
			}
			if got := strings.TrimSpace(string(out)); got != strings.TrimSpace(tt.doc) {
				t.Errorf("round trip changed the document:\n--- got\n%s\n--- want\n%s", got, tt.doc)
			}
		})
	}
}

func TestNodePoolDeepCopyIsIndependent(t *testing.T) {
	orig := &NodePool{Spec: NodePoolSpec{Template: NodeClaimTemplate{
		TemplateObjectMeta: TemplateObjectMeta{Labels: map[string]string{"team": "a"}, Annotations: map[string]string{"a": "b"}},
		Spec: NodeClaimTemplateSpec{
			Requirements: []NodeSelectorRequirementWithMinValues{{Key: "k", Operator: corev1.NodeSelectorOpIn, Values: []string{"v"}}},
			NodeClassRef: &NodeClassReference{Group: "g", Kind: "K", Name: "n"},
		},
	}}}
	cp := orig.DeepCopy()
	cp.Spec.Template.Labels["team"] = "b"
	cp.Spec.Template.Annotations["a"] = "c"
	cp.Spec.Template.Spec.Requirements[0].Values[0] = "w"
	cp.Spec.Template.Spec.NodeClassRef.Name = "m"
	if orig.Spec.Template.Labels["team"] != "a" || orig.Spec.Template.Annotations["a"] != "b" ||
		orig.Spec.Template.Spec.Requirements[0].Values[0] != "v" || orig.Spec.Template.Spec.NodeClassRef.Name != "n" {
		t.Errorf("changing the deep copy changed the original: %+v", orig.Spec.Template)
	}
	var nilMeta *TemplateObjectMeta
	if nilMeta.DeepCopy() != nil {
		t.Errorf("DeepCopy of a nil TemplateObjectMeta is not nil")
	}
}

func TestTemplateNodeClaimSpec(t *testing.T) {
	tgp := metav1.Duration{Duration: time.Hour}
	tmpl := NodeClaimTemplateSpec{
		Taints:                 []Taint{{Key: "a", Effect: corev1.TaintEffectNoSchedule}},
		StartupTaints:          []Taint{{Key: "b", Effect: corev1.TaintEffectNoExecute}},
		Requirements:           []NodeSelectorRequirementWithMinValues{{Key: "k", Operator: corev1.NodeSelectorOpExists}},
		NodeClassRef:           &NodeClassReference{Group: "g", Kind: "K", Name: "n"},
		TerminationGracePeriod: &tgp,
		ExpireAfter:            NeverDuration(),
	}
	got := tmpl.NodeClaimSpec()
	want := NodeClaimSpec{
		Taints: tmpl.Taints, StartupTaints: tmpl.StartupTaints, Requirements: tmpl.Requirements,
		NodeClassRef: tmpl.NodeClassRef, TerminationGracePeriod: &tgp, ExpireAfter: NeverDuration(),
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("NodeClaimSpec() = %+v, want %+v", got, want)
	}
}

func TestStatusCondition(t *testing.T) {
	nc := &NodeClaim{Status: NodeClaimStatus{Conditions: []metav1.Condition{
		{Type: ConditionTypeLaunched, Status: metav1.ConditionTrue},
		{Type: ConditionTypeDrifted, Status: metav1.ConditionFalse},
	}}}
	tests := []struct {
		conditionType string
		want          metav1.ConditionStatus // empty means absent
	}{
		{ConditionTypeLaunched, metav1.ConditionTrue},
		{ConditionTypeDrifted, metav1.ConditionFalse},
		{ConditionTypeReady, ""},
	}
	for _, tt := range tests {
		c := nc.StatusCondition(tt.conditionType)
		switch {
		case tt.want == "" && c != nil:
			t.Errorf("StatusCondition(%q) = %+v, want nil", tt.conditionType, c)
		case tt.want != "" && (c == nil || c.Status != tt.want):
			t.Errorf("StatusCondition(%q) = %+v, want status %s", tt.conditionType, c, tt.want)
		}
	}
	np := &NodePool{Status: NodePoolStatus{Conditions: []metav1.Condition{{Type: ConditionTypeNodeClassReady, Status: metav1.ConditionUnknown}}}}
	if c := np.StatusCondition(ConditionTypeNodeClassReady); c == nil || c.Status != metav1.ConditionUnknown {
		t.Errorf("NodePool StatusCondition = %+v, want Unknown", c)
	}
}

func TestSetCondition(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	now := t0.Add(time.Minute)
	launched := func(generation int64) []metav1.Condition {
		return []metav1.Condition{{
			Type: ConditionTypeLaunched, Status: metav1.ConditionTrue, Reason: "Launched",
			ObservedGeneration: generation, LastTransitionTime: metav1.NewTime(t0),
		}}
	}
	tests := []struct {
		name           string
		conditions     []metav1.Condition
		status         metav1.ConditionStatus
		reason         string
		message        string
		wantChanged    bool
		wantTransition time.Time
	}{
		{name: "new condition is stamped now", status: metav1.ConditionTrue, reason: "Launched",
			wantChanged: true, wantTransition: now},
		{name: "identical condition changes nothing", conditions: launched(2),
			status: metav1.ConditionTrue, reason: "Launched", wantChanged: false, wantTransition: t0},
		{name: "newer generation is stamped, transition kept", conditions: launched(1),
			status: metav1.ConditionTrue, reason: "Launched", wantChanged: true, wantTransition: t0},
		{name: "new reason and message keep the transition time", conditions: launched(2),
			status: metav1.ConditionTrue, reason: "Other", message: "m", wantChanged: true, wantTransition: t0},
		{name: "status change is stamped now", conditions: launched(2),
			status: metav1.ConditionFalse, reason: "Failed", message: "boom", wantChanged: true, wantTransition: now},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			objectMeta := metav1.ObjectMeta{Generation: 2}
			nc := &NodeClaim{ObjectMeta: objectMeta, Status: NodeClaimStatus{Conditions: append([]metav1.Condition(nil), tt.conditions...)}}
			np := &NodePool{ObjectMeta: objectMeta, Status: NodePoolStatus{Conditions: append([]metav1.Condition(nil), tt.conditions...)}}
			for _, obj := range []struct {
				kind string
				set  func(time.Time, string, metav1.ConditionStatus, string, string) bool
				get  func(string) *metav1.Condition
			}{
				{"NodeClaim", nc.SetCondition, nc.StatusCondition},
				{"NodePool", np.SetCondition, np.StatusCondition},
			} {
				changed := obj.set(now, ConditionTypeLaunched, tt.status, tt.reason, tt.message)
				if changed != tt.wantChanged {
					t.Errorf("%s: SetCondition changed = %v, want %v", obj.kind, changed, tt.wantChanged)
				}
				c := obj.get(ConditionTypeLaunched)
				if c == nil {
					t.Fatalf("%s: condition missing after SetCondition", obj.kind)
				}
				if c.Status != tt.status || c.Reason != tt.reason || c.Message != tt.message {
					t.Errorf("%s: condition = %s/%s/%q, want %s/%s/%q", obj.kind, c.Status, c.Reason, c.Message,
						tt.status, tt.reason, tt.message)
				}
				if c.ObservedGeneration != 2 {
					t.Errorf("%s: ObservedGeneration = %d, want the object's generation 2", obj.kind, c.ObservedGeneration)
				}
				if !c.LastTransitionTime.Time.Equal(tt.wantTransition) {
					t.Errorf("%s: LastTransitionTime = %v, want %v", obj.kind, c.LastTransitionTime.Time, tt.wantTransition)
				}
			}
		})
	}
}

func TestNodePoolIsStatic(t *testing.T) {
	zero, three := int64(0), int64(3)
	tests := []struct {
		name     string
		replicas *int64
		want     bool
	}{
		{name: "replicas unset", replicas: nil, want: false},
		{name: "zero replicas is still static", replicas: &zero, want: true},
		{name: "three replicas", replicas: &three, want: true},
	}
	for _, tt := range tests {
		np := &NodePool{Spec: NodePoolSpec{Replicas: tt.replicas}}
		if got := np.IsStatic(); got != tt.want {
			t.Errorf("%s: IsStatic() = %v, want %v", tt.name, got, tt.want)
		}
	}
}
