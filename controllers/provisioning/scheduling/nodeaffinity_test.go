package scheduling

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
)

func TestNodeSelectorAndRequiredNodeAffinity(t *testing.T) {
	zone := karpv1.LabelTopologyZone
	tests := []struct {
		name string
		opt  podOption
		// want: the label values the plan must fix, or wantErr: parts of the error.
		want    map[string]string
		wantErr []string
	}{
		{name: "nodeSelector on zone", opt: withNodeSelector(zone, fake.Zone2), want: map[string]string{zone: fake.Zone2}},
		{name: "beta zone label is normalised", opt: withNodeSelector("failure-domain.beta.kubernetes.io/zone", fake.Zone3), want: map[string]string{zone: fake.Zone3}},
		{name: "nodeSelector on a NodePool label", opt: withNodeSelector("team", "a"), want: map[string]string{"team": "a"}},
		{name: "nodeSelector on an unknown label", opt: withNodeSelector("team", "b"),
			wantErr: []string{`NodePool "default" ruled out: incompatible requirement team In [b] vs [a]`}},
		{name: "label no node carries", opt: withNodeSelector("example.com/disk", "ssd"),
			wantErr: []string{"incompatible requirement example.com/disk In [ssd] vs label not defined"}},
		{name: "In", opt: withNodeAffinity(nodeSelectorRequirement(karpv1.LabelInstanceType, corev1.NodeSelectorOpIn, "fake-it-3", "fake-it-7")),
			want: map[string]string{karpv1.LabelInstanceType: "fake-it-3"}},
		{name: "NotIn", opt: withNodeAffinity(nodeSelectorRequirement(karpv1.LabelInstanceType, corev1.NodeSelectorOpNotIn, "fake-it-0", "fake-it-1")),
			want: map[string]string{karpv1.LabelInstanceType: "fake-it-2"}},
		{name: "Exists on an instance-type label", opt: withNodeAffinity(nodeSelectorRequirement(fake.LabelSpecial, corev1.NodeSelectorOpExists)),
			want: map[string]string{karpv1.LabelInstanceType: "fake-it-4"}},
		{name: "DoesNotExist on an instance-type label", opt: withNodeAffinity(nodeSelectorRequirement(fake.LabelSpecial, corev1.NodeSelectorOpDoesNotExist)),
			want: map[string]string{karpv1.LabelInstanceType: "fake-it-0"}},
		{name: "Gt", opt: withNodeAffinity(nodeSelectorRequirement(fake.LabelInteger, corev1.NodeSelectorOpGt, "9")),
			want: map[string]string{karpv1.LabelInstanceType: "fake-it-9"}},
		{name: "Lt with Gt", opt: withNodeAffinity(nodeSelectorRequirement(fake.LabelInteger, corev1.NodeSelectorOpGt, "2"), nodeSelectorRequirement(fake.LabelInteger, corev1.NodeSelectorOpLt, "4")),
			want: map[string]string{karpv1.LabelInstanceType: "fake-it-2"}},
		{name: "Gt beyond every type", opt: withNodeAffinity(nodeSelectorRequirement(fake.LabelInteger, corev1.NodeSelectorOpGt, "16")),
			wantErr: []string{"incompatible requirement integer Gt 16 vs"}},
		{name: "second term used when the first cannot match", opt: func(p *corev1.Pod) {
			withNodeAffinity(nodeSelectorRequirement(karpv1.LabelArch, corev1.NodeSelectorOpIn, karpv1.ArchitectureArm64))(p)
			withNodeAffinity(nodeSelectorRequirement(zone, corev1.NodeSelectorOpIn, fake.Zone3))(p)
		}, want: map[string]string{zone: fake.Zone3}},
		{name: "arch conflict names both sides", opt: withNodeAffinity(nodeSelectorRequirement(karpv1.LabelArch, corev1.NodeSelectorOpIn, karpv1.ArchitectureArm64)),
			wantErr: []string{`NodePool "default" ruled out: incompatible requirement kubernetes.io/arch In [arm64] vs [amd64]`}},
		{name: "hostname of no node", opt: withNodeSelector(karpv1.LabelHostname, "node-a"),
			wantErr: []string{"incompatible requirement kubernetes.io/hostname In [node-a] vs label not defined"}},
		{name: "capacity type and zone together", opt: withNodeAffinity(nodeSelectorRequirement(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot"), nodeSelectorRequirement(zone, corev1.NodeSelectorOpNotIn, fake.Zone1)),
			want: map[string]string{karpv1.CapacityTypeLabelKey: "spot", zone: ""}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPod("p", "500m", "512Mi", tt.opt)
			r := solve(t, Input{Pods: []*corev1.Pod{p}, NodePools: []NodePool{pool(newNodePool("default", poolLabels("team", "a")))}})
			if tt.wantErr != nil {
				wantContains(t, errorOf(r, "p"), tt.wantErr...)
				return
			}
			nc := planOf(t, r, "p")
			for k, v := range tt.want {
				got := single(nc, k)
				if k == karpv1.LabelInstanceType {
					got = cheapest(nc)
				}
				if got != v {
					t.Errorf("%s = %q, want %q (requirements %s)", k, got, v, nc.Requirements)
				}
			}
		})
	}
}

func TestCapacityTypeNarrowsOfferings(t *testing.T) {
	// zone 3 has no spot offering, so spot in zone 3 is impossible while on-demand is fine.
	p := newPod("spot", "500m", "512Mi", withNodeSelector(karpv1.LabelTopologyZone, fake.Zone3, karpv1.CapacityTypeLabelKey, "spot"))
	q := newPod("od", "500m", "512Mi", withNodeSelector(karpv1.LabelTopologyZone, fake.Zone3, karpv1.CapacityTypeLabelKey, "on-demand"))
	r := solve(t, Input{Pods: []*corev1.Pod{p, q}, NodePools: []NodePool{pool(newNodePool("default"))}})
	wantContains(t, errorOf(r, "spot"), `NodePool "default" ruled out`)
	if nc := planOf(t, r, "od"); single(nc, karpv1.CapacityTypeLabelKey) != "on-demand" {
		t.Errorf("on-demand pod got %s", nc.Requirements)
	}
}
