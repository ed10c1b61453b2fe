package state

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/testsupport/resourcestest"
)

// countedClaim is a NodeClaim with the given status.capacity (nil: not launched yet) and requests.
func countedClaim(name string, capacity, requests corev1.ResourceList) karpv1.NodeClaim {
	return karpv1.NodeClaim{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       karpv1.NodeClaimSpec{Resources: karpv1.ResourceRequirements{Requests: requests}},
		Status:     karpv1.NodeClaimStatus{Capacity: capacity},
	}
}

func TestUsage(t *testing.T) {
	byRequests := func(nc *karpv1.NodeClaim) corev1.ResourceList { return nc.Spec.Resources.Requests }
	huge := func(*karpv1.NodeClaim) corev1.ResourceList { return resourcestest.List("cpu", "1000") }
	zero := resourcestest.List("cpu", "0", "memory", "0", "pods", "0", "ephemeral-storage", "0", "nodes", "0")
	tests := []struct {
		name       string
		claims     []karpv1.NodeClaim
		unlaunched func(*karpv1.NodeClaim) corev1.ResourceList
		want       corev1.ResourceList
	}{
		{
			name: "no NodeClaims: the base resources, all zero",
			want: zero,
		},
		{
			name: "launched NodeClaims add up their capacity, extended resources included",
			claims: []karpv1.NodeClaim{
				countedClaim("a", resourcestest.List("cpu", "2", "memory", "4Gi", "pods", "20"), nil),
				countedClaim("b", resourcestest.List("cpu", "4", "memory", "8Gi", "pods", "40", "nvidia.com/gpu", "1"), nil),
			},
			want: resourcestest.List("cpu", "6", "memory", "12Gi", "pods", "60", "ephemeral-storage", "0", "nodes", "2", "nvidia.com/gpu", "1"),
		},
		{
			name:   "a NodeClaim not launched yet counts only as a node without a function",
			claims: []karpv1.NodeClaim{countedClaim("a", nil, resourcestest.List("cpu", "2"))},
			want:   resourcestest.List("cpu", "0", "memory", "0", "pods", "0", "ephemeral-storage", "0", "nodes", "1"),
		},
		{
			name:       "a NodeClaim not launched yet counts what the function says",
			claims:     []karpv1.NodeClaim{countedClaim("a", nil, resourcestest.List("cpu", "2", "memory", "1Gi"))},
			unlaunched: byRequests,
			want:       resourcestest.List("cpu", "2", "memory", "1Gi", "pods", "0", "ephemeral-storage", "0", "nodes", "1"),
		},
		{
			name:       "the function is not asked about launched NodeClaims",
			claims:     []karpv1.NodeClaim{countedClaim("a", resourcestest.List("cpu", "2"), nil)},
			unlaunched: huge,
			want:       resourcestest.List("cpu", "2", "memory", "0", "pods", "0", "ephemeral-storage", "0", "nodes", "1"),
		},
		{
			name: "nodes counts every NodeClaim, launched or not",
			claims: []karpv1.NodeClaim{
				countedClaim("a", resourcestest.List("cpu", "1"), nil),
				countedClaim("b", nil, nil),
				countedClaim("c", nil, resourcestest.List("cpu", "1")),
			},
			unlaunched: byRequests,
			want:       resourcestest.List("cpu", "2", "memory", "0", "pods", "0", "ephemeral-storage", "0", "nodes", "3"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Usage(tt.claims, tt.unlaunched); !resourcestest.Equal(got, tt.want) {
				t.Errorf("Usage = %s, want %s", resourcestest.Describe(got), resourcestest.Describe(tt.want))
			}
		})
	}
}

func TestRemaining(t *testing.T) {
	tests := []struct {
		name          string
		limits, usage corev1.ResourceList
		want          corev1.ResourceList
	}{
		{
			name:  "nil limits: unlimited",
			usage: resourcestest.List("cpu", "4"),
			want:  nil,
		},
		{
			name:   "empty limits: unlimited",
			limits: corev1.ResourceList{},
			usage:  resourcestest.List("cpu", "4"),
			want:   nil,
		},
		{
			name:   "each limit minus its usage",
			limits: resourcestest.List("cpu", "10", "memory", "32Gi", "nodes", "5"),
			usage:  resourcestest.List("cpu", "4", "memory", "8Gi", "nodes", "2"),
			want:   resourcestest.List("cpu", "6", "memory", "24Gi", "nodes", "3"),
		},
		{
			name:   "a limited resource nothing uses is left whole",
			limits: resourcestest.List("nvidia.com/gpu", "4"),
			usage:  resourcestest.List("cpu", "4"),
			want:   resourcestest.List("nvidia.com/gpu", "4"),
		},
		{
			name:   "usage over the limit leaves zero, not less",
			limits: resourcestest.List("cpu", "2", "memory", "1Gi"),
			usage:  resourcestest.List("cpu", "4", "memory", "1Gi"),
			want:   resourcestest.List("cpu", "0", "memory", "0"),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			limitsBefore := resourcestest.Describe(tt.limits)
			if got := Remaining(tt.limits, tt.usage); !resourcestest.Equal(got, tt.want) {
				t.Errorf("Remaining = %s, want %s", resourcestest.Describe(got), resourcestest.Describe(tt.want))
			}
			if after := resourcestest.Describe(tt.limits); after != limitsBefore {
				t.Errorf("Remaining changed the limits from %s to %s", limitsBefore, after)
			}
		})
	}
}

func TestRollout(t *testing.T) {
	now := metav1.Now()
	withCondition := func(conditionType string) karpv1.NodeClaim {
		nc := karpv1.NodeClaim{}
		nc.SetCondition(now.Time, conditionType, metav1.ConditionTrue, conditionType, "")
		return nc
	}
	deleting := karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &now}}
	driftedAndDisrupting := withCondition(karpv1.ConditionTypeDrifted)
	driftedAndDisrupting.SetCondition(now.Time, karpv1.ConditionTypeDisruptionReason, metav1.ConditionTrue, "Drifted", "")
	tests := []struct {
		name   string
		claims []karpv1.NodeClaim
		want   karpv1.NodePoolRollout
	}{
		{"none", nil, karpv1.NodePoolRollout{}},
		{"plain NodeClaims are up to date", []karpv1.NodeClaim{{}, {}}, karpv1.NodePoolRollout{UpToDate: 2}},
		{"drifted", []karpv1.NodeClaim{{}, withCondition(karpv1.ConditionTypeDrifted)}, karpv1.NodePoolRollout{UpToDate: 1, Drifted: 1}},
		{"a drifted NodeClaim being replaced counts as disrupting", []karpv1.NodeClaim{driftedAndDisrupting}, karpv1.NodePoolRollout{Disrupting: 1}},
		{"deleting", []karpv1.NodeClaim{deleting}, karpv1.NodePoolRollout{Disrupting: 1}},
		{"soft-expired is not up to date", []karpv1.NodeClaim{withCondition(karpv1.ConditionTypeExpired)}, karpv1.NodePoolRollout{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Rollout(tt.claims); *got != tt.want {
				t.Errorf("Rollout = %+v, want %+v", *got, tt.want)
			}
		})
	}
}
