package scheduling

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
)

// daemonTestTypes are four types in every fake offering (spot in zones 1 and 2, on-demand in 1, 2
// and 3): arm-2 ($0.1/h) and arm-4 ($0.2/h) are arm64, amd-2 and amd-4 amd64 and dearer. Each
// keeps 100m cpu for the system, so arm-2 has 1900m allocatable and arm-4 3900m.
func daemonTestTypes() []*cloudprovider.InstanceType {
	newType := func(name, arch string, cpus int64, price float64) *cloudprovider.InstanceType {
		opts := fake.InstanceTypeOptions{Name: name, Architecture: arch, Capacity: corev1.ResourceList{
			corev1.ResourceCPU:    *resource.NewQuantity(cpus, resource.DecimalSI),
			corev1.ResourceMemory: *resource.NewQuantity(2*cpus<<30, resource.BinarySI),
			corev1.ResourcePods:   resource.MustParse("20"),
		}}
		if price > 0 {
			opts.Offerings = fake.DefaultOfferings(price)
		}
		return fake.NewInstanceType(opts)
	}
	return []*cloudprovider.InstanceType{
		newType("arm-2", karpv1.ArchitectureArm64, 2, 0.1),
		newType("arm-4", karpv1.ArchitectureArm64, 4, 0.2),
		newType("amd-2", karpv1.ArchitectureAmd64, 2, 0),
		newType("amd-4", karpv1.ArchitectureAmd64, 4, 0),
	}
}

// TestDaemonSetOverheadPerInstanceType places one 1-cpu pod with DaemonSets that run on some nodes
// only: each is charged to the instance types and offerings it would run on, and only a DaemonSet
// that runs on every node of the NodePool is part of the NodeClaim's requests.
type daemonOverheadCase struct {
	name     string
	pool     []poolOption
	daemons  []*corev1.Pod
	pod      []podOption
	wantType string // the NodeClaim's cheapest option
	wantCPU  string // the NodeClaim's cpu requests
}

func TestDaemonSetOverheadPerInstanceType(t *testing.T) {
	tests := daemonOverheadCases()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPod("p", "1", "1Gi", tt.pod...)
			r := solve(t, Input{Pods: []*corev1.Pod{p}, NodePools: []NodePool{pool(newNodePool("default", tt.pool...), daemonTestTypes()...)}, DaemonSetPods: tt.daemons})
			nc := planOf(t, r, "p")
			if got := cheapest(nc); got != tt.wantType {
				t.Errorf("cheapest option %s, want %s (options %v)", got, tt.wantType, nc.InstanceTypeNames())
			}
			want := resource.MustParse(tt.wantCPU)
			if got := nc.Requests[corev1.ResourceCPU]; got.Cmp(want) != 0 {
				t.Errorf("requests cpu %s, want %s", got.String(), want.String())
			}
		})
	}
}

func daemonOverheadCases() []daemonOverheadCase {
	dedicated := corev1.Taint{Key: "dedicated", Value: "x", Effect: corev1.TaintEffectNoSchedule}
	tolerateAll := withTolerations(corev1.Toleration{Operator: corev1.TolerationOpExists})
	ds := func(name, cpu string, opts ...podOption) *corev1.Pod { return newPod(name, cpu, "100Mi", opts...) }
	on := func(key string, values ...string) podOption {
		return withNodeAffinity(nodeSelectorRequirement(key, corev1.NodeSelectorOpIn, values...))
	}
	return []daemonOverheadCase{
		{name: "a DaemonSet on every node is in the requests",
			daemons: []*corev1.Pod{ds("logs", "1500m")}, wantType: "arm-4", wantCPU: "2500m"},
		{name: "an arm64 DaemonSet is charged to the arm64 types only",
			daemons:  []*corev1.Pod{ds("arm-agent", "3", withNodeSelector(karpv1.LabelArch, karpv1.ArchitectureArm64))},
			wantType: "amd-2", wantCPU: "1"},
		{name: "an arm64 DaemonSet is charged to an arm64 pod's node",
			daemons:  []*corev1.Pod{ds("arm-agent", "1500m", withNodeSelector(karpv1.LabelArch, karpv1.ArchitectureArm64))},
			pod:      []podOption{withNodeSelector(karpv1.LabelArch, karpv1.ArchitectureArm64)},
			wantType: "arm-4", wantCPU: "1"},
		{name: "a DaemonSet selecting every architecture is charged to every type",
			daemons:  []*corev1.Pod{ds("agent", "1500m", on(karpv1.LabelArch, karpv1.ArchitectureAmd64, karpv1.ArchitectureArm64))},
			wantType: "arm-4", wantCPU: "1"},
		{name: "a DaemonSet of one instance type is charged to that type only",
			daemons:  []*corev1.Pod{ds("agent", "1500m", on(karpv1.LabelInstanceType, "arm-2"))},
			wantType: "arm-4", wantCPU: "1"},
		{name: "a zonal DaemonSet costs nothing in another zone",
			daemons:  []*corev1.Pod{ds("zonal", "1500m", on(karpv1.LabelTopologyZone, fake.Zone1))},
			pod:      []podOption{withNodeSelector(karpv1.LabelTopologyZone, fake.Zone2)},
			wantType: "arm-2", wantCPU: "1"},
		{name: "a zonal DaemonSet is charged in its zone",
			daemons:  []*corev1.Pod{ds("zonal", "1500m", on(karpv1.LabelTopologyZone, fake.Zone1))},
			pod:      []podOption{withNodeSelector(karpv1.LabelTopologyZone, fake.Zone1)},
			wantType: "arm-4", wantCPU: "1"},
		{name: "a zonal DaemonSet is charged while the zone is open",
			daemons:  []*corev1.Pod{ds("zonal", "1500m", on(karpv1.LabelTopologyZone, fake.Zone1))},
			wantType: "arm-4", wantCPU: "1"},
		{name: "a spot DaemonSet costs nothing on on-demand capacity",
			daemons:  []*corev1.Pod{ds("spot-agent", "1500m", on(karpv1.CapacityTypeLabelKey, karpv1.CapacityTypeSpot))},
			pod:      []podOption{withNodeSelector(karpv1.CapacityTypeLabelKey, karpv1.CapacityTypeOnDemand)},
			wantType: "arm-2", wantCPU: "1"},
		{name: "a spot DaemonSet is charged on spot capacity",
			daemons:  []*corev1.Pod{ds("spot-agent", "1500m", on(karpv1.CapacityTypeLabelKey, karpv1.CapacityTypeSpot))},
			pod:      []podOption{withNodeSelector(karpv1.CapacityTypeLabelKey, karpv1.CapacityTypeSpot)},
			wantType: "arm-4", wantCPU: "1"},
		{name: "a spot DaemonSet costs nothing in a zone without spot offerings",
			daemons:  []*corev1.Pod{ds("spot-agent", "1500m", on(karpv1.CapacityTypeLabelKey, karpv1.CapacityTypeSpot))},
			pod:      []podOption{withNodeSelector(karpv1.LabelTopologyZone, fake.Zone3)},
			wantType: "arm-2", wantCPU: "1"},
		{name: "a DaemonSet selecting one value of an open custom label costs nothing on the other",
			pool:     []poolOption{poolRequirement("team", corev1.NodeSelectorOpIn, "a", "b")},
			daemons:  []*corev1.Pod{ds("team-a-agent", "1500m", withNodeSelector("team", "a"))},
			pod:      []podOption{withNodeSelector("team", "b")},
			wantType: "arm-2", wantCPU: "1"},
		{name: "a DaemonSet selecting one value of an open custom label is charged on it",
			pool:     []poolOption{poolRequirement("team", corev1.NodeSelectorOpIn, "a", "b")},
			daemons:  []*corev1.Pod{ds("team-a-agent", "1500m", withNodeSelector("team", "a"))},
			pod:      []podOption{withNodeSelector("team", "a")},
			wantType: "arm-4", wantCPU: "1"},
		{name: "a DaemonSet not tolerating the NodePool's taint costs nothing",
			pool:     []poolOption{poolTaints(dedicated)},
			daemons:  []*corev1.Pod{ds("logs", "1500m")},
			pod:      []podOption{tolerateAll},
			wantType: "arm-2", wantCPU: "1"},
		{name: "a tolerating arm64 DaemonSet on a tainted NodePool is charged to the arm64 types",
			pool:     []poolOption{poolTaints(dedicated)},
			daemons:  []*corev1.Pod{ds("arm-agent", "3", tolerateAll, withNodeSelector(karpv1.LabelArch, karpv1.ArchitectureArm64))},
			pod:      []podOption{tolerateAll},
			wantType: "amd-2", wantCPU: "1"},
	}
}

// TestDaemonSetOverheadOfExtendedResources charges the extended resources of a DaemonSet that runs
// on some types only to those types.
func TestDaemonSetOverheadOfExtendedResources(t *testing.T) {
	const gpu = corev1.ResourceName("nvidia.com/gpu")
	gpuTypes := []*cloudprovider.InstanceType{
		fake.NewInstanceType(fake.InstanceTypeOptions{Name: "gpu-small", Offerings: fake.DefaultOfferings(1),
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), gpu: resource.MustParse("1")}}),
		fake.NewInstanceType(fake.InstanceTypeOptions{Name: "gpu-large", Offerings: fake.DefaultOfferings(2),
			Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourceMemory: resource.MustParse("32Gi"), gpu: resource.MustParse("2")}}),
	}
	// A DaemonSet holding one GPU on gpu-small nodes leaves none there for the pod.
	holder := newPod("holder", "100m", "100Mi", withRequests(gpu, "1"),
		withNodeAffinity(nodeSelectorRequirement(karpv1.LabelInstanceType, corev1.NodeSelectorOpIn, "gpu-small")))
	p := newPod("p", "1", "1Gi", withRequests(gpu, "1"))
	r := solve(t, Input{Pods: []*corev1.Pod{p}, NodePools: []NodePool{pool(newNodePool("default"), gpuTypes...)}, DaemonSetPods: []*corev1.Pod{holder}})
	nc := planOf(t, r, "p")
	if got := nc.InstanceTypeNames(); len(got) != 1 || got[0] != "gpu-large" {
		t.Fatalf("options %v, want only gpu-large", got)
	}
	if got := nc.Requests[gpu]; got.Value() != 1 {
		t.Errorf("requests %s GPUs, want the pod's 1", got.String())
	}
}
