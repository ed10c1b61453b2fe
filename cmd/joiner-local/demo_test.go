package main

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrlfake "sigs.k8s.io/controller-runtime/pkg/client/fake"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	apischeme "github.com/joiner-dev/joiner/api/scheme"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
)

func TestLaunchPrice(t *testing.T) {
	s, err := apischeme.New()
	if err != nil {
		t.Fatal(err)
	}
	c := ctrlfake.NewClientBuilder().WithScheme(s).WithObjects(&karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}}).Build()
	cp := fake.New(fake.NewInstanceType(fake.InstanceTypeOptions{Name: "small", Offerings: cloudprovider.Offerings{
		cloudprovider.NewOffering(fake.Zone1, karpv1.CapacityTypeSpot, 0.0123, true),
		cloudprovider.NewOffering(fake.Zone1, karpv1.CapacityTypeOnDemand, 0.05, true),
		cloudprovider.NewOffering(fake.Zone2, karpv1.CapacityTypeOnDemand, 0.06, true),
	}}))
	launched := func(pool, instanceType, zone, capacityType string) *karpv1.NodeClaim {
		return &karpv1.NodeClaim{ObjectMeta: metav1.ObjectMeta{Name: "nc", Labels: map[string]string{
			karpv1.NodePoolLabelKey: pool, corev1.LabelInstanceTypeStable: instanceType,
			corev1.LabelTopologyZone: zone, karpv1.CapacityTypeLabelKey: capacityType,
		}}}
	}
	tests := []struct {
		name    string
		nc      *karpv1.NodeClaim
		want    float64
		wantErr string
	}{
		{"spot in zone 1", launched("default", "small", fake.Zone1, karpv1.CapacityTypeSpot), 0.0123, ""},
		{"on-demand in zone 2", launched("default", "small", fake.Zone2, karpv1.CapacityTypeOnDemand), 0.06, ""},
		{"no such offering", launched("default", "small", fake.Zone2, karpv1.CapacityTypeSpot), 0, "NodePool default offers no spot small in test-zone-2"},
		{"no such type", launched("default", "large", fake.Zone1, karpv1.CapacityTypeSpot), 0, "offers no spot large"},
		{"NodePool gone", launched("gone", "small", fake.Zone1, karpv1.CapacityTypeSpot), 0, "get its NodePool"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := launchPrice(context.Background(), c, cp, tt.nc)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("got %v, %v; want %v", got, err, tt.want)
			}
		})
	}
}

func TestDescribeCost(t *testing.T) {
	tests := []struct {
		name   string
		prices map[string]float64
		nodes  int
		want   string
	}{
		{"every price known", map[string]float64{"a": 0.1, "b": 0.0234}, 2, "$0.1234/h in all"},
		{"a price unknown", map[string]float64{"a": 0.1}, 3, "$0.1000/h for the 1 of 3 nodes with a known price"},
		{"no node", nil, 0, "$0.0000/h in all"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := describeCost(tt.prices, tt.nodes); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}
