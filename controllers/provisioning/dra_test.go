package provisioning

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/provisioning/dra"
	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling"
)

func gpuList(n int64) corev1.ResourceList {
	return corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(n, resource.DecimalSI)}
}

// claimingPod is a pod of namespace ml that names the ResourceClaim.
func claimingPod(name, claim string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name, UID: types.UID("uid-" + name)},
		Spec: corev1.PodSpec{ResourceClaims: []corev1.PodResourceClaim{{Name: "dev", ResourceClaimName: ptr.To(claim)}}}}
}

// TestDeviceRoom checks the device room of existing nodes and in-flight NodeClaims: a node whose
// GPUs a DRA driver publishes (none in its allocatable) gets its NodeClaim's, less what its pods'
// claims hold; a node advertising the extended resource keeps it, less the claims; other nodes are
// not changed.
func TestDeviceRoom(t *testing.T) {
	one := resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{
		{Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: dra.ClassNVIDIAGPU, Count: 1}}}}}
	var claims []resourcev1.ResourceClaim
	for _, name := range []string{"c1", "c2", "c3"} {
		claims = append(claims, resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name}, Spec: one})
	}
	objs := dra.NewObjects(claims, nil, []resourcev1.DeviceClass{{ObjectMeta: metav1.ObjectMeta{Name: dra.ClassNVIDIAGPU}}})
	cpu := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8")}
	withGPUs := func(n int64) corev1.ResourceList {
		l := cpu.DeepCopy()
		l["nvidia.com/gpu"] = *resource.NewQuantity(n, resource.DecimalSI)
		return l
	}
	launched := func(name, node string, alloc corev1.ResourceList) karpv1.NodeClaim {
		return karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: karpv1.NodeClaimStatus{NodeName: node, Allocatable: alloc}}
	}
	nodeClaims := []karpv1.NodeClaim{launched("nc-dra", "dra-node", withGPUs(4)), launched("nc-inflight", "", withGPUs(1)), launched("nc-full", "full-node", withGPUs(1))}
	cases := []struct {
		name string
		node *scheduling.ExistingNode
		// want is the GPUs the node offers after deviceRoom; -1 when it must be left as it was.
		want int64
	}{
		{name: "DRA node: its NodeClaim's GPUs less its pods' claims",
			node: &scheduling.ExistingNode{Name: "dra-node", Allocatable: cpu, Pods: []*corev1.Pod{claimingPod("a", "c1")}}, want: 3},
		{name: "in-flight NodeClaim less its nominated pods' claims",
			node: &scheduling.ExistingNode{Name: "nc-inflight", Allocatable: withGPUs(1), Pods: []*corev1.Pod{claimingPod("b", "c2")}}, want: 0},
		{name: "more claims than GPUs: none left, never negative",
			node: &scheduling.ExistingNode{Name: "full-node", Allocatable: cpu, Pods: []*corev1.Pod{claimingPod("c", "c1"), claimingPod("d", "c3")}}, want: 0},
		{name: "device-plugin node without DRA pods is left alone",
			node: &scheduling.ExistingNode{Name: "plugin-node", Allocatable: withGPUs(8)}, want: -1},
		{name: "unmanaged node without GPUs is left alone",
			node: &scheduling.ExistingNode{Name: "plain", Allocatable: cpu, Pods: []*corev1.Pod{claimingPod("e", "c1")}}, want: -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.node.Allocatable.DeepCopy()
			nodes := []*scheduling.ExistingNode{tc.node}
			deviceRoom(nodes, nodeClaims, objs)
			if !equality.Semantic.DeepEqual(tc.node.Allocatable, before) {
				t.Fatalf("the input node was changed: %v, was %v", tc.node.Allocatable, before)
			}
			if tc.want < 0 {
				if nodes[0] != tc.node {
					t.Errorf("node replaced with allocatable %v; want it left alone", nodes[0].Allocatable)
				}
				return
			}
			// A resource not listed offers none.
			if got := nodes[0].Allocatable["nvidia.com/gpu"]; got.Value() != tc.want {
				t.Errorf("nvidia.com/gpu = %v, want %d; allocatable %v", got.String(), tc.want, nodes[0].Allocatable)
			}
			if c := nodes[0].Allocatable[corev1.ResourceCPU]; c.Cmp(resource.MustParse("8")) != 0 {
				t.Errorf("cpu = %v, want it kept at 8", c.String())
			}
		})
	}
}

// TestStripDevices checks that a NodeClaim's requests lose the devices that stand for its pods'
// claims, and keep what the pods request as extended resources themselves.
func TestStripDevices(t *testing.T) {
	cases := []struct {
		name     string
		requests corev1.ResourceList
		added    map[string]int64 // pod name -> GPUs modelled for it
		want     corev1.ResourceList
	}{
		{name: "all devices from claims", requests: gpuList(3), added: map[string]int64{"a": 1, "b": 2}, want: corev1.ResourceList{}},
		{name: "a device-plugin request stays", requests: gpuList(3), added: map[string]int64{"a": 2}, want: gpuList(1)},
		{name: "no claims: unchanged", requests: gpuList(2), want: gpuList(2)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := draRound{added: map[types.UID]corev1.ResourceList{}}
			var pods []*corev1.Pod
			for _, name := range []string{"a", "b", "c"} {
				pod := claimingPod(name, "x")
				pods = append(pods, pod)
				if n, ok := tc.added[name]; ok {
					r.added[pod.UID] = gpuList(n)
				}
			}
			planned := tc.requests.DeepCopy()
			nc := &karpv1.NodeClaim{Spec: karpv1.NodeClaimSpec{Resources: karpv1.ResourceRequirements{Requests: planned}}}
			r.strip(nc, pods)
			if !equality.Semantic.DeepEqual(nc.Spec.Resources.Requests, tc.want) {
				t.Errorf("requests = %v, want %v", nc.Spec.Resources.Requests, tc.want)
			}
			if !equality.Semantic.DeepEqual(planned, tc.requests) {
				t.Errorf("the plan's requests were changed to %v", planned)
			}
		})
	}
}
