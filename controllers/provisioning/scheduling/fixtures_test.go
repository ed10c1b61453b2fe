package scheduling

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
)

// Builders for the unit tests: pods, NodePools and inputs with just the fields a case needs.

type podOption func(*corev1.Pod)

func newPod(name, cpu, memory string, opts ...podOption) *corev1.Pod {
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU:    resource.MustParse(cpu),
				corev1.ResourceMemory: resource.MustParse(memory),
			}},
		}}},
	}
	for _, o := range opts {
		o(p)
	}
	return p
}

func withLabels(kv ...string) podOption {
	return func(p *corev1.Pod) {
		for i := 0; i < len(kv); i += 2 {
			p.Labels[kv[i]] = kv[i+1]
		}
	}
}

func withNodeSelector(kv ...string) podOption {
	return func(p *corev1.Pod) {
		p.Spec.NodeSelector = map[string]string{}
		for i := 0; i < len(kv); i += 2 {
			p.Spec.NodeSelector[kv[i]] = kv[i+1]
		}
	}
}

func affinity(p *corev1.Pod) *corev1.Affinity {
	if p.Spec.Affinity == nil {
		p.Spec.Affinity = &corev1.Affinity{}
	}
	return p.Spec.Affinity
}

// withNodeAffinity adds one required node affinity term (terms are ORed).
func withNodeAffinity(reqs ...corev1.NodeSelectorRequirement) podOption {
	return func(p *corev1.Pod) {
		a := affinity(p)
		if a.NodeAffinity == nil {
			a.NodeAffinity = &corev1.NodeAffinity{}
		}
		if a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution == nil {
			a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution = &corev1.NodeSelector{}
		}
		ns := a.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution
		ns.NodeSelectorTerms = append(ns.NodeSelectorTerms, corev1.NodeSelectorTerm{MatchExpressions: reqs})
	}
}

func withPreferredNodeAffinity(weight int32, reqs ...corev1.NodeSelectorRequirement) podOption {
	return func(p *corev1.Pod) {
		a := affinity(p)
		if a.NodeAffinity == nil {
			a.NodeAffinity = &corev1.NodeAffinity{}
		}
		a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.NodeAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.PreferredSchedulingTerm{Weight: weight, Preference: corev1.NodeSelectorTerm{MatchExpressions: reqs}})
	}
}

func term(key string, selector ...string) corev1.PodAffinityTerm {
	labels := map[string]string{}
	for i := 0; i < len(selector); i += 2 {
		labels[selector[i]] = selector[i+1]
	}
	return corev1.PodAffinityTerm{TopologyKey: key, LabelSelector: &metav1.LabelSelector{MatchLabels: labels}}
}

func withPodAffinity(t corev1.PodAffinityTerm) podOption {
	return func(p *corev1.Pod) {
		a := affinity(p)
		if a.PodAffinity == nil {
			a.PodAffinity = &corev1.PodAffinity{}
		}
		a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.RequiredDuringSchedulingIgnoredDuringExecution, t)
	}
}

func withPodAntiAffinity(t corev1.PodAffinityTerm) podOption {
	return func(p *corev1.Pod) {
		a := affinity(p)
		if a.PodAntiAffinity == nil {
			a.PodAntiAffinity = &corev1.PodAntiAffinity{}
		}
		a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.RequiredDuringSchedulingIgnoredDuringExecution, t)
	}
}

func withPreferredPodAntiAffinity(weight int32, t corev1.PodAffinityTerm) podOption {
	return func(p *corev1.Pod) {
		a := affinity(p)
		if a.PodAntiAffinity == nil {
			a.PodAntiAffinity = &corev1.PodAntiAffinity{}
		}
		a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.WeightedPodAffinityTerm{Weight: weight, PodAffinityTerm: t})
	}
}

func withPreferredPodAffinity(weight int32, t corev1.PodAffinityTerm) podOption {
	return func(p *corev1.Pod) {
		a := affinity(p)
		if a.PodAffinity == nil {
			a.PodAffinity = &corev1.PodAffinity{}
		}
		a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution = append(a.PodAffinity.PreferredDuringSchedulingIgnoredDuringExecution,
			corev1.WeightedPodAffinityTerm{Weight: weight, PodAffinityTerm: t})
	}
}

func withSpread(key string, maxSkew int32, when corev1.UnsatisfiableConstraintAction, selector ...string) podOption {
	return func(p *corev1.Pod) {
		labels := map[string]string{}
		for i := 0; i < len(selector); i += 2 {
			labels[selector[i]] = selector[i+1]
		}
		p.Spec.TopologySpreadConstraints = append(p.Spec.TopologySpreadConstraints, corev1.TopologySpreadConstraint{
			MaxSkew: maxSkew, TopologyKey: key, WhenUnsatisfiable: when, LabelSelector: &metav1.LabelSelector{MatchLabels: labels},
		})
	}
}

func withTolerations(ts ...corev1.Toleration) podOption {
	return func(p *corev1.Pod) { p.Spec.Tolerations = append(p.Spec.Tolerations, ts...) }
}

func withHostPort(port int32) podOption {
	return func(p *corev1.Pod) {
		p.Spec.Containers[0].Ports = append(p.Spec.Containers[0].Ports, corev1.ContainerPort{ContainerPort: port, HostPort: port})
	}
}

func withRequests(name corev1.ResourceName, q string) podOption {
	return func(p *corev1.Pod) { p.Spec.Containers[0].Resources.Requests[name] = resource.MustParse(q) }
}

// nodeSelectorRequirement builds one node selector requirement.
func nodeSelectorRequirement(key string, op corev1.NodeSelectorOperator, values ...string) corev1.NodeSelectorRequirement {
	return corev1.NodeSelectorRequirement{Key: key, Operator: op, Values: values}
}

type poolOption func(*karpv1.NodePool)

func newNodePool(name string, opts ...poolOption) *karpv1.NodePool {
	np := &karpv1.NodePool{}
	np.Name = name
	np.Spec.Template.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: "test.joiner.dev", Kind: "TestNodeClass", Name: "default"}
	for _, o := range opts {
		o(np)
	}
	return np
}

func poolRequirements(reqs ...karpv1.NodeSelectorRequirementWithMinValues) poolOption {
	return func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Requirements = append(np.Spec.Template.Spec.Requirements, reqs...)
	}
}

func poolRequirement(key string, op corev1.NodeSelectorOperator, values ...string) poolOption {
	return poolRequirements(karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values})
}

func poolLabels(kv ...string) poolOption {
	return func(np *karpv1.NodePool) {
		if np.Spec.Template.Labels == nil {
			np.Spec.Template.Labels = map[string]string{}
		}
		for i := 0; i < len(kv); i += 2 {
			np.Spec.Template.Labels[kv[i]] = kv[i+1]
		}
	}
}

func poolTaints(ts ...corev1.Taint) poolOption {
	return func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Taints = append(np.Spec.Template.Spec.Taints, karpv1.TaintsFromCore(ts)...)
	}
}

func poolStartupTaints(ts ...corev1.Taint) poolOption {
	return func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.StartupTaints = append(np.Spec.Template.Spec.StartupTaints, karpv1.TaintsFromCore(ts)...)
	}
}

func poolWeight(w int32) poolOption {
	return func(np *karpv1.NodePool) { np.Spec.Weight = &w }
}

// pool wraps a NodePool with instance types (fake.InstanceTypes(16) when none are given).
func pool(np *karpv1.NodePool, its ...*cloudprovider.InstanceType) NodePool {
	if len(its) == 0 {
		its = fake.InstanceTypes(16)
	}
	return NodePool{NodePool: np, InstanceTypes: its}
}

// armType is a 4-cpu arm64 instance type, cheaper than the amd64 ones.
func armType() *cloudprovider.InstanceType {
	return fake.NewInstanceType(fake.InstanceTypeOptions{
		Name:         "arm-4",
		Architecture: karpv1.ArchitectureArm64,
		Capacity:     corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4"), corev1.ResourceMemory: resource.MustParse("8Gi"), corev1.ResourcePods: resource.MustParse("40")},
		Offerings:    fake.DefaultOfferings(0.1),
	})
}

// gpuType is an 8-cpu type with 2 nvidia.com/gpu.
func gpuType() *cloudprovider.InstanceType {
	return fake.NewInstanceType(fake.InstanceTypeOptions{
		Name: "gpu-8",
		Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"),
			corev1.ResourcePods: resource.MustParse("40"), "nvidia.com/gpu": resource.MustParse("2")},
		Offerings: fake.DefaultOfferings(10),
	})
}

func solve(t *testing.T, in Input) *Results {
	t.Helper()
	r, err := Solve(context.Background(), in)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// outcome summarises results for table tests: for each pod, "node<i>" (new NodeClaim i),
// "existing:<name>" or "error: <message>".
func outcome(r *Results) map[string]string {
	out := map[string]string{}
	for i, nc := range r.NewNodeClaims {
		for _, p := range nc.Pods {
			out[p.Name] = fmt.Sprintf("node%d", i)
		}
	}
	for _, e := range r.ExistingNodes {
		for _, p := range e.Pods {
			out[p.Name] = "existing:" + e.Node.Name
		}
	}
	for _, pe := range r.PodErrors {
		out[pe.Pod.Name] = "error: " + pe.Err.Error()
	}
	return out
}

// planOf returns the NodeClaim plan holding the pod.
func planOf(t *testing.T, r *Results, podName string) *NodeClaimPlan {
	t.Helper()
	for _, nc := range r.NewNodeClaims {
		for _, p := range nc.Pods {
			if p.Name == podName {
				return nc
			}
		}
	}
	for _, pe := range r.PodErrors {
		if pe.Pod.Name == podName {
			t.Fatalf("pod %s unschedulable: %v", podName, pe.Err)
		}
	}
	t.Fatalf("pod %s not on a new NodeClaim", podName)
	return nil
}

// single returns the only value the plan allows for key, or "" when it allows several.
func single(nc *NodeClaimPlan, key string) string {
	r, ok := nc.Requirements.Get(key)
	if !ok {
		return ""
	}
	v, _ := r.Single()
	return v
}

func errorOf(r *Results, podName string) string {
	for _, pe := range r.PodErrors {
		if pe.Pod.Name == podName {
			return pe.Err.Error()
		}
	}
	return ""
}

func wantContains(t *testing.T, got string, parts ...string) {
	t.Helper()
	for _, p := range parts {
		if !strings.Contains(got, p) {
			t.Errorf("%q does not contain %q", got, p)
		}
	}
}

func cheapest(nc *NodeClaimPlan) string {
	if len(nc.InstanceTypeOptions) == 0 {
		return ""
	}
	return nc.InstanceTypeOptions[0].Name
}

func podNames(pods []*corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Name
	}
	slices.Sort(out)
	return out
}

func fakeTypes(n int) []*cloudprovider.InstanceType { return fake.InstanceTypes(n) }
