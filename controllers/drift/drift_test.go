package drift

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
)

func hashes(hash, version string) map[string]string {
	out := map[string]string{}
	if hash != "" {
		out[karpv1.NodePoolHashAnnotationKey] = hash
	}
	if version != "" {
		out[karpv1.NodePoolHashVersionAnnotationKey] = version
	}
	return out
}

func TestStaticDrift(t *testing.T) {
	const v = karpv1.NodePoolHashVersion
	cases := []struct {
		name       string
		pool, node map[string]string
		want       cloudprovider.DriftReason
	}{
		{name: "same hash", pool: hashes("1", v), node: hashes("1", v)},
		{name: "different hash", pool: hashes("1", v), node: hashes("2", v), want: ReasonNodePoolDrifted},
		{name: "different versions", pool: hashes("1", v), node: hashes("2", "v2")},
		{name: "nodeclaim without a version", pool: hashes("1", v), node: hashes("2", "")},
		{name: "nodeclaim without a hash", pool: hashes("1", v), node: hashes("", v)},
		{name: "nodepool without a hash", pool: hashes("", v), node: hashes("2", v)},
		{name: "nodepool without a version", pool: hashes("1", ""), node: hashes("2", v)},
		{name: "no annotations", pool: nil, node: nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Annotations: tc.pool}}
			nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Annotations: tc.node}}
			if got := staticDrift(np, nc); got != tc.want {
				t.Errorf("staticDrift = %q, want %q", got, tc.want)
			}
		})
	}
}

func TestRequirementsDrift(t *testing.T) {
	req := func(key string, op corev1.NodeSelectorOperator, values ...string) karpv1.NodeSelectorRequirementWithMinValues {
		return karpv1.NodeSelectorRequirementWithMinValues{Key: key, Operator: op, Values: values}
	}
	node := map[string]string{
		karpv1.LabelTopologyZone:    "us-east-1a",
		karpv1.CapacityTypeLabelKey: karpv1.CapacityTypeSpot,
		karpv1.LabelInstanceType:    "m5.large",
		"example.com/gen":           "5",
	}
	cases := []struct {
		name string
		reqs []karpv1.NodeSelectorRequirementWithMinValues
		want cloudprovider.DriftReason
	}{
		{name: "no requirements"},
		{name: "value allowed", reqs: []karpv1.NodeSelectorRequirementWithMinValues{req(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a", "us-east-1b")}},
		{name: "widened", reqs: []karpv1.NodeSelectorRequirementWithMinValues{req(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1a", "us-east-1b", "us-east-1c")}},
		{name: "narrowed past the node's value", reqs: []karpv1.NodeSelectorRequirementWithMinValues{req(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1b")},
			want: ReasonRequirementsDrifted},
		{name: "node's value excluded", reqs: []karpv1.NodeSelectorRequirementWithMinValues{req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpNotIn, karpv1.CapacityTypeSpot)},
			want: ReasonRequirementsDrifted},
		{name: "other value excluded", reqs: []karpv1.NodeSelectorRequirementWithMinValues{req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpNotIn, karpv1.CapacityTypeOnDemand)}},
		{name: "label the node lacks", reqs: []karpv1.NodeSelectorRequirementWithMinValues{req("example.com/team", corev1.NodeSelectorOpIn, "a")},
			want: ReasonRequirementsDrifted},
		{name: "absent label may stay absent", reqs: []karpv1.NodeSelectorRequirementWithMinValues{req("example.com/team", corev1.NodeSelectorOpDoesNotExist)}},
		{name: "label exists", reqs: []karpv1.NodeSelectorRequirementWithMinValues{req(karpv1.LabelInstanceType, corev1.NodeSelectorOpExists)}},
		{name: "greater than holds", reqs: []karpv1.NodeSelectorRequirementWithMinValues{req("example.com/gen", corev1.NodeSelectorOpGt, "4")}},
		{name: "greater than fails", reqs: []karpv1.NodeSelectorRequirementWithMinValues{req("example.com/gen", corev1.NodeSelectorOpGt, "5")},
			want: ReasonRequirementsDrifted},
		{name: "minValues does not apply to one node", reqs: []karpv1.NodeSelectorRequirementWithMinValues{{
			Key: karpv1.LabelInstanceType, Operator: corev1.NodeSelectorOpIn, Values: []string{"m5.large", "m5.xlarge"}, MinValues: ptr.To(2)}}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			np := &karpv1.NodePool{Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{Requirements: tc.reqs}}}}
			nc := &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Labels: node}}
			got, err := requirementsDrift(np, nc)
			if err != nil || got != tc.want {
				t.Errorf("requirementsDrift = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

func TestNewMetricsTwice(t *testing.T) {
	reg := prometheus.NewRegistry()
	first, err := NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	second, err := NewMetrics(reg)
	if err != nil {
		t.Fatalf("second NewMetrics: %v", err)
	}
	if first.Drifted != second.Drifted {
		t.Error("the second NewMetrics did not reuse the registered metric")
	}
}
