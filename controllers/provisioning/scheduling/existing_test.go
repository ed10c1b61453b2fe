package scheduling

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
)

func TestNewExistingNode(t *testing.T) {
	node := &corev1.Node{}
	node.Name = "n1"
	node.Labels = map[string]string{karpv1.LabelTopologyZone: fake.Zone1}
	node.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")}
	node.Spec.Taints = []corev1.Taint{
		{Key: karpv1.UnregisteredTaintKey, Effect: corev1.TaintEffectNoExecute},
		{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule},
		{Key: "cni", Effect: corev1.TaintEffectNoSchedule},
		{Key: "dedicated", Value: "db", Effect: corev1.TaintEffectNoSchedule},
	}
	startup := []corev1.Taint{{Key: "cni", Effect: corev1.TaintEffectNoSchedule}}
	tests := []struct {
		initialized bool
		want        []string
	}{
		{false, []string{"dedicated"}},
		{true, []string{karpv1.UnregisteredTaintKey, corev1.TaintNodeNotReady, "cni", "dedicated"}},
	}
	for _, tt := range tests {
		en := NewExistingNode(node, nil, "default", tt.initialized, startup)
		var got []string
		for _, taint := range en.Taints {
			got = append(got, taint.Key)
		}
		if len(got) != len(tt.want) {
			t.Errorf("initialized=%v: taints %v, want %v", tt.initialized, got, tt.want)
		}
		if en.Name != "n1" || en.NodePool != "default" || en.Initialized != tt.initialized {
			t.Errorf("fields %+v", en)
		}
	}
}

func TestNewInFlightNodeClaim(t *testing.T) {
	nc := &karpv1.NodeClaim{}
	nc.Name = "default-abc"
	nc.Labels = map[string]string{karpv1.NodePoolLabelKey: "default", karpv1.LabelTopologyZone: fake.Zone2}
	nc.Spec.Taints = []karpv1.Taint{{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}}
	nc.Spec.Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
	en := NewInFlightNodeClaim(nc, nil)
	if en.Name != "default-abc" || en.NodePool != "default" || en.Initialized || len(en.Taints) != 1 {
		t.Fatalf("%+v", en)
	}
	if c := en.Allocatable[corev1.ResourceCPU]; c.Value() != 1 {
		t.Fatalf("without status.allocatable the requests stand in: %v", en.Allocatable)
	}
	nc.Status.NodeName = "ip-10-0-0-1"
	nc.Status.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}
	if en := NewInFlightNodeClaim(nc, nil); en.Name != "ip-10-0-0-1" || en.Allocatable.Cpu().Value() != 4 {
		t.Fatalf("%+v", en)
	}
}

func TestExistingNodes(t *testing.T) {
	small := func(name, zone string) *ExistingNode {
		n := existingNode(name, zone)
		n.Allocatable = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourceMemory: resource.MustParse("4Gi"), corev1.ResourcePods: resource.MustParse("10")}
		return n
	}
	tainted := small("tainted", fake.Zone1)
	tainted.Taints = []corev1.Taint{{Key: "dedicated", Effect: corev1.TaintEffectNoSchedule}}
	starting := small("starting", fake.Zone1)
	starting.Initialized = false
	noPods := small("no-pod-count", fake.Zone1)
	delete(noPods.Allocatable, corev1.ResourcePods)
	tests := []struct {
		name     string
		existing []*ExistingNode
		pods     []*corev1.Pod
		want     map[string]string
	}{
		{"fits the free room", []*ExistingNode{small("n1", fake.Zone1)}, []*corev1.Pod{newPod("a", "1", "1Gi")}, map[string]string{"a": "existing:n1"}},
		{"room is shared with the node's pods", []*ExistingNode{small("n1", fake.Zone1)}, []*corev1.Pod{newPod("a", "1200m", "1Gi"), newPod("b", "1200m", "1Gi")},
			map[string]string{"a": "existing:n1", "b": "node0"}},
		{"node's own pods count", []*ExistingNode{func() *ExistingNode {
			n := small("n1", fake.Zone1)
			n.Pods = []*corev1.Pod{newPod("old", "1500m", "1Gi")}
			return n
		}()},
			[]*corev1.Pod{newPod("a", "1", "1Gi")}, map[string]string{"a": "node0"}},
		{"taint keeps pods off", []*ExistingNode{tainted}, []*corev1.Pod{newPod("a", "100m", "100Mi")}, map[string]string{"a": "node0"}},
		{"tolerating pod may use it", []*ExistingNode{tainted},
			[]*corev1.Pod{newPod("a", "100m", "100Mi", withTolerations(corev1.Toleration{Key: "dedicated", Operator: corev1.TolerationOpExists}))},
			map[string]string{"a": "existing:tainted"}},
		{"labels must match", []*ExistingNode{small("n1", fake.Zone1)}, []*corev1.Pod{newPod("a", "100m", "100Mi", withNodeSelector(karpv1.LabelTopologyZone, fake.Zone2))},
			map[string]string{"a": "node0"}},
		{"hostname selects the node", []*ExistingNode{small("n1", fake.Zone1), small("n2", fake.Zone1)},
			[]*corev1.Pod{newPod("a", "100m", "100Mi", withNodeSelector(karpv1.LabelHostname, "n2"))}, map[string]string{"a": "existing:n2"}},
		{"initialized nodes first", []*ExistingNode{starting, small("ready", fake.Zone1)}, []*corev1.Pod{newPod("a", "100m", "100Mi")},
			map[string]string{"a": "existing:ready"}},
		{"a node that does not report pods is not limited by them", []*ExistingNode{noPods}, []*corev1.Pod{newPod("a", "100m", "100Mi")},
			map[string]string{"a": "existing:no-pod-count"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := solve(t, Input{Pods: tt.pods, ExistingNodes: tt.existing, NodePools: []NodePool{pool(newNodePool("default"))}})
			got := outcome(r)
			for pod, want := range tt.want {
				if got[pod] != want {
					t.Errorf("%s on %q, want %q", pod, got[pod], want)
				}
			}
		})
	}
}
