package tenancy_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/tenancy"
)

func nodePool(name string, taints ...karpv1.Taint) karpv1.NodePool {
	np := karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name}}
	np.Spec.Template.Spec.Taints = taints
	return np
}

func taint(key, value string) karpv1.Taint {
	return karpv1.Taint{Key: key, Value: value, Effect: corev1.TaintEffectNoSchedule}
}

// cluster: team-a's pools share the taint joiner.dev/team=a, team-b's carry joiner.dev/team=b, and the
// GPU taint is on pools of both teams.
func cluster() []karpv1.NodePool {
	return []karpv1.NodePool{
		nodePool("team-b-gpu", taint("joiner.dev/team", "b"), taint("nvidia.com/gpu", "")),
		nodePool("team-a", taint("joiner.dev/team", "a")),
		nodePool("team-b", taint("joiner.dev/team", "b")),
		nodePool("team-a-gpu", taint("joiner.dev/team", "a"), taint("nvidia.com/gpu", "")),
		nodePool("shared"),
	}
}

func pod(mutate func(*corev1.PodSpec)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"}}
	if mutate != nil {
		mutate(&p.Spec)
	}
	return p
}

func nodePoolIn(values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: karpv1.NodePoolLabelKey, Operator: corev1.NodeSelectorOpIn, Values: values}
}

func TestBoundNodePools(t *testing.T) {
	tests := []struct {
		name string
		ns   *corev1.Namespace
		want []string
	}{
		{"nil namespace", nil, nil},
		{"no annotation", &corev1.Namespace{}, nil},
		{"empty annotation", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{tenancy.NodePoolsAnnotation: " , "}}}, nil},
		{"trimmed, deduplicated, in order", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{tenancy.NodePoolsAnnotation: " b, a ,b,, c"}}}, []string{"b", "a", "c"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := tenancy.BoundNodePools(tc.ns); !slices.Equal(got, tc.want) {
				t.Errorf("BoundNodePools = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestAllowsAndUnbound(t *testing.T) {
	tests := []struct {
		name        string
		bound       []string
		names       []string
		wantUnbound []string
	}{
		{"unbound namespace allows every NodePool", nil, []string{"team-a", "team-b"}, nil},
		{"only the bound NodePools are allowed", []string{"team-a", "team-a-gpu"}, []string{"team-b", "team-a", "team-b-gpu", "team-b"}, []string{"team-b", "team-b-gpu"}},
		{"nothing to judge", []string{"team-a"}, nil, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := tenancy.Unbound(tc.bound, tc.names)
			if !slices.Equal(got, tc.wantUnbound) {
				t.Errorf("Unbound = %q, want %q", got, tc.wantUnbound)
			}
			for _, name := range tc.names {
				if allowed := tenancy.Allows(tc.bound, name); allowed == slices.Contains(tc.wantUnbound, name) {
					t.Errorf("Allows(%q, %q) = %v, disagrees with Unbound", tc.bound, name, allowed)
				}
			}
		})
	}
}

func TestCheck(t *testing.T) {
	teamB := corev1.Toleration{Key: "joiner.dev/team", Operator: corev1.TolerationOpEqual, Value: "b", Effect: corev1.TaintEffectNoSchedule}
	teamA := corev1.Toleration{Key: "joiner.dev/team", Operator: corev1.TolerationOpEqual, Value: "a", Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name   string
		bound  []string
		pod    *corev1.Pod
		want   []tenancy.Violation
		fields []string // when want is nil: only the fields are compared
	}{
		{name: "unbound namespace: nothing to report", pod: pod(func(s *corev1.PodSpec) {
			s.NodeSelector = map[string]string{karpv1.NodePoolLabelKey: "team-b"}
			s.Tolerations = []corev1.Toleration{teamB}
		})},
		{name: "own NodePool and taint", bound: []string{"team-a"}, pod: pod(func(s *corev1.PodSpec) {
			s.NodeSelector = map[string]string{karpv1.NodePoolLabelKey: "team-a"}
			s.Tolerations = []corev1.Toleration{teamA}
		})},
		{name: "nodeSelector of another tenant's NodePool", bound: []string{"team-a"},
			pod: pod(func(s *corev1.PodSpec) { s.NodeSelector = map[string]string{karpv1.NodePoolLabelKey: "team-b"} }),
			want: []tenancy.Violation{{Field: "spec.nodeSelector[karpenter.sh/nodepool]", NodePools: []string{"team-b"},
				Message: `spec.nodeSelector[karpenter.sh/nodepool]: NodePool team-b is not bound to namespace "team-a" (bound: team-a); use only the bound NodePools`}}},
		{name: "required and preferred affinity", bound: []string{"team-a", "team-a-gpu"},
			pod: pod(func(s *corev1.PodSpec) {
				s.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
					RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{
						{MatchExpressions: []corev1.NodeSelectorRequirement{nodePoolIn("team-a")}},
						{MatchExpressions: []corev1.NodeSelectorRequirement{nodePoolIn("team-a", "team-b", "team-b-gpu")}},
					}},
					PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{
						{Weight: 1, Preference: corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{
							{Key: karpv1.NodePoolLabelKey, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"team-b"}}, nodePoolIn("shared")}}},
					},
				}}
			}),
			fields: []string{
				"spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution.nodeSelectorTerms[1].matchExpressions[0]",
				"spec.affinity.nodeAffinity.preferredDuringSchedulingIgnoredDuringExecution[0].preference.matchExpressions[1]",
			}},
		{name: "toleration of another tenant's taint", bound: []string{"team-a"},
			pod: pod(func(s *corev1.PodSpec) { s.Tolerations = []corev1.Toleration{teamA, teamB} }),
			want: []tenancy.Violation{{Field: "spec.tolerations[1]", NodePools: []string{"team-b"},
				Message: `spec.tolerations[1]: tolerates joiner.dev/team=b:NoSchedule, a taint only NodePool "team-b" carries, which is not bound to namespace "team-a"; remove the toleration`}}},
		{name: "a taint the own NodePools carry too is not foreign", bound: []string{"team-a-gpu"},
			pod: pod(func(s *corev1.PodSpec) {
				s.Tolerations = []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}
			})},
		{name: "key-less Exists tolerates everything", bound: []string{"team-a"},
			pod: pod(func(s *corev1.PodSpec) { s.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}} }),
			want: []tenancy.Violation{{Field: "spec.tolerations[0]", NodePools: []string{"team-a-gpu"},
				Message: `spec.tolerations[0]: operator Exists without a key tolerates every taint, including nvidia.com/gpu:NoSchedule of NodePool "team-a-gpu", which is not bound to namespace "team-a"; set the key of a bound NodePool's taint`}}},
		{name: "selection and toleration both reported, selection first", bound: []string{"team-a"},
			pod: pod(func(s *corev1.PodSpec) {
				s.Tolerations = []corev1.Toleration{teamB}
				s.NodeSelector = map[string]string{karpv1.NodePoolLabelKey: "team-b"}
			}),
			fields: []string{"spec.nodeSelector[karpenter.sh/nodepool]", "spec.tolerations[0]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nodePools := cluster()
			before := slices.Clone(nodePools)
			got := tenancy.Check("team-a", tc.bound, tc.pod, nodePools)
			if !slices.EqualFunc(nodePools, before, func(a, b karpv1.NodePool) bool { return a.Name == b.Name }) {
				t.Error("Check reordered the NodePools it was given")
			}
			if tc.fields != nil {
				var fields []string
				for _, v := range got {
					fields = append(fields, v.Field)
				}
				if !slices.Equal(fields, tc.fields) {
					t.Errorf("fields %q, want %q", fields, tc.fields)
				}
				return
			}
			if !slices.EqualFunc(got, tc.want, func(a, b tenancy.Violation) bool {
				return a.Field == b.Field && a.Message == b.Message && slices.Equal(a.NodePools, b.NodePools)
			}) {
				t.Errorf("Check\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestPlacement(t *testing.T) {
	running := pod(func(s *corev1.PodSpec) { s.NodeName = "node-1" })
	tests := []struct {
		name     string
		bound    []string
		nodePool string
		want     string
	}{
		{name: "unbound namespace", nodePool: "team-b"},
		{name: "node of no NodePool", bound: []string{"team-a"}},
		{name: "node of a bound NodePool", bound: []string{"team-a"}, nodePool: "team-a"},
		{name: "node of another tenant's NodePool", bound: []string{"team-a"}, nodePool: "team-b",
			want: `spec.nodeName: runs on node "node-1" of NodePool "team-b", which is not bound to namespace "team-a" (bound: team-a); delete the pod so that it is recreated on a bound NodePool`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v, broken := tenancy.Placement("team-a", tc.bound, running, tc.nodePool)
			if broken != (tc.want != "") || v.Message != tc.want {
				t.Errorf("Placement = %q, %v; want %q", v.Message, broken, tc.want)
			}
			if broken && (v.Field != "spec.nodeName" || !slices.Equal(v.NodePools, []string{tc.nodePool})) {
				t.Errorf("Placement field %q NodePools %q", v.Field, v.NodePools)
			}
		})
	}
}
