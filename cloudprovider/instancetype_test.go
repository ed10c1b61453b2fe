package cloudprovider_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/requirements"
)

func rl(pairs ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i < len(pairs); i += 2 {
		out[corev1.ResourceName(pairs[i])] = resource.MustParse(pairs[i+1])
	}
	return out
}

func TestAllocatable(t *testing.T) {
	tests := []struct {
		name     string
		capacity corev1.ResourceList
		overhead cloudprovider.Overhead
		want     corev1.ResourceList
	}{
		{"all three reservations", rl("cpu", "4", "memory", "16Gi", "pods", "110"),
			cloudprovider.Overhead{KubeReserved: rl("cpu", "80m", "memory", "1Gi"), SystemReserved: rl("cpu", "20m"), EvictionThreshold: rl("memory", "100Mi")},
			rl("cpu", "3900m", "memory", "15260Mi", "pods", "110")},
		{"no overhead", rl("cpu", "2"), cloudprovider.Overhead{}, rl("cpu", "2")},
		{"never negative", rl("cpu", "100m"), cloudprovider.Overhead{KubeReserved: rl("cpu", "1")}, rl("cpu", "0")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			it := &cloudprovider.InstanceType{Capacity: tt.capacity, Overhead: tt.overhead}
			got := it.Allocatable()
			if len(got) != len(tt.want) {
				t.Fatalf("got %v, want %v", got, tt.want)
			}
			for k, v := range tt.want {
				if g := got[k]; g.Cmp(v) != 0 {
					t.Errorf("%s = %s, want %s", k, g.String(), v.String())
				}
			}
			// Memoised: the same map is returned.
			if fmt.Sprintf("%p", it.Allocatable()) != fmt.Sprintf("%p", got) {
				t.Error("Allocatable is recomputed")
			}
		})
	}
}

func instanceType(name string, cpu string, offerings ...*cloudprovider.Offering) *cloudprovider.InstanceType {
	return &cloudprovider.InstanceType{
		Name: name,
		Requirements: requirements.New(
			requirements.In(karpv1.LabelInstanceType, name),
			requirements.In(karpv1.LabelArch, karpv1.ArchitectureAmd64),
		),
		Offerings: offerings,
		Capacity:  rl("cpu", cpu, "memory", "8Gi", "pods", "10"),
	}
}

func TestOfferings(t *testing.T) {
	ofs := cloudprovider.Offerings{
		cloudprovider.NewOffering("z1", "spot", 0.5, true),
		cloudprovider.NewOffering("z2", "spot", 0.3, false),
		cloudprovider.NewOffering("z2", "on-demand", 1.0, true),
		cloudprovider.NewOffering("z3", "on-demand", 0.9, true),
	}
	if got := ofs[0].Zone() + "/" + ofs[0].CapacityType(); got != "z1/spot" {
		t.Fatalf("accessors: %s", got)
	}
	if n := len(ofs.Available()); n != 3 {
		t.Fatalf("Available: %d", n)
	}
	if c := ofs.Cheapest(); c.Price != 0.3 {
		t.Fatalf("Cheapest: %v", c.Price)
	}
	tests := []struct {
		name  string
		reqs  requirements.Requirements
		price float64 // 0: none
	}{
		{"anything", requirements.Requirements{}, 0.5},
		{"zone 2 skips the unavailable spot", requirements.New(requirements.In(karpv1.LabelTopologyZone, "z2")), 1.0},
		{"on-demand", requirements.New(requirements.In(karpv1.CapacityTypeLabelKey, "on-demand")), 0.9},
		{"nothing in z4", requirements.New(requirements.In(karpv1.LabelTopologyZone, "z4")), 0},
		{"unrelated keys ignored", requirements.New(requirements.In("team", "a")), 0.5},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o, ok := ofs.CheapestCompatible(tt.reqs)
			if ok != (tt.price != 0) || (ok && o.Price != tt.price) {
				t.Fatalf("got %v %v, want %v", o, ok, tt.price)
			}
			if got := len(ofs.Compatible(tt.reqs).Available()) > 0; got != ok {
				t.Fatalf("Compatible().Available() disagrees: %v", got)
			}
		})
	}
}

func TestInstanceTypesOrderAndCompatible(t *testing.T) {
	its := cloudprovider.InstanceTypes{
		instanceType("c", "4", cloudprovider.NewOffering("z1", "spot", 3, true)),
		instanceType("a", "2", cloudprovider.NewOffering("z1", "spot", 1, true), cloudprovider.NewOffering("z2", "on-demand", 5, true)),
		instanceType("b", "2", cloudprovider.NewOffering("z2", "on-demand", 2, true)),
		instanceType("d", "8", cloudprovider.NewOffering("z1", "spot", 0.1, false)),
	}
	if got := its.OrderByPrice(requirements.Requirements{}).Names(); !slices.Equal(got, []string{"a", "b", "c", "d"}) {
		t.Errorf("OrderByPrice = %v", got)
	}
	z2 := requirements.New(requirements.In(karpv1.LabelTopologyZone, "z2"))
	if got := its.OrderByPrice(z2).Names(); !slices.Equal(got, []string{"b", "a", "c", "d"}) {
		t.Errorf("OrderByPrice(z2) = %v", got)
	}
	if got := its.Compatible(z2).Names(); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("Compatible(z2) = %v", got)
	}
	arm := requirements.New(requirements.In(karpv1.LabelArch, karpv1.ArchitectureArm64))
	if got := its.Compatible(arm); len(got) != 0 {
		t.Errorf("Compatible(arm64) = %v", got.Names())
	}
	if !its[0].Fits(rl("cpu", "4", "memory", "1Gi")) || its[0].Fits(rl("cpu", "4", "nvidia.com/gpu", "1")) || its[0].Fits(rl("cpu", "5")) {
		t.Error("Fits is wrong")
	}
}

func TestMinValuesAndTruncate(t *testing.T) {
	var its cloudprovider.InstanceTypes
	for i, family := range []string{"m", "m", "m", "c", "m", "r"} {
		it := instanceType(fmt.Sprintf("%s.%d", family, i), "2", cloudprovider.NewOffering("z1", "spot", float64(i), true))
		it.Requirements.Add(requirements.In("family", family))
		its = append(its, it)
	}
	reqs := requirements.New(requirements.Exists("family").WithMinValues(3))
	if err := its.SatisfiesMinValues(reqs); err != nil {
		t.Fatal(err)
	}
	got, err := its.Truncate(reqs, 2)
	if err != nil {
		t.Fatal(err)
	}
	// The two cheapest are both "m"; Truncate adds c.3 and r.5, skipping m.2 and m.4.
	if names := got.Names(); !slices.Equal(names, []string{"m.0", "m.1", "c.3", "r.5"}) {
		t.Errorf("Truncate = %v", names)
	}
	if got, _ := its.Truncate(requirements.Requirements{}, 2); len(got) != 2 {
		t.Errorf("plain Truncate kept %d", len(got))
	}
	err = its[:3].SatisfiesMinValues(reqs)
	want := "minValues of family is 3 but the 3 remaining instance types offer 1 distinct values; lower minValues or allow more instance types"
	if err == nil || err.Error() != want {
		t.Errorf("got %v", err)
	}
	if _, err := its[:3].Truncate(reqs, 1); err == nil {
		t.Error("Truncate should fail when the whole list misses minValues")
	}
}

func TestErrors(t *testing.T) {
	base := errors.New("boom")
	ice := fmt.Errorf("launch: %w", cloudprovider.NewInsufficientCapacityError("m5.large", "z1", "spot", base))
	if !cloudprovider.IsInsufficientCapacity(ice) || cloudprovider.IsNodeClaimNotFound(ice) || cloudprovider.IsNodeClassNotReady(ice) {
		t.Fatal("ICE classification")
	}
	e, ok := cloudprovider.AsInsufficientCapacity(ice)
	if !ok || e.InstanceType != "m5.large" || e.Zone != "z1" || e.CapacityType != "spot" || !errors.Is(ice, base) {
		t.Fatalf("ICE fields: %+v", e)
	}
	if got := e.Error(); got != `insufficient capacity for instance type "m5.large" in zone "z1" (capacity type "spot"): boom` {
		t.Fatalf("ICE message: %s", got)
	}
	nf := fmt.Errorf("get: %w", cloudprovider.NewNodeClaimNotFoundError(base))
	if !cloudprovider.IsNodeClaimNotFound(nf) || cloudprovider.IgnoreNodeClaimNotFound(nf) != nil || cloudprovider.IgnoreNodeClaimNotFound(base) != base {
		t.Fatal("not found classification")
	}
	if !cloudprovider.IsNodeClassNotReady(cloudprovider.NewNodeClassNotReadyError(base)) {
		t.Fatal("not ready classification")
	}
	var ce *cloudprovider.CreateError
	if !errors.As(fmt.Errorf("x: %w", cloudprovider.NewCreateError(base, "Reason", "msg")), &ce) || ce.Reason != "Reason" || ce.Error() != "msg: boom" {
		t.Fatal("create error")
	}
}
