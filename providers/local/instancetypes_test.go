package local

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/providers/catalog"
	"github.com/joiner-dev/joiner/requirements"
)

func loadCatalog(t *testing.T) *catalog.Catalog {
	t.Helper()
	cat, err := catalog.Load()
	if err != nil {
		t.Fatalf("load catalog: %v", err)
	}
	return cat
}

// TestCapacityAndAllocatable checks the node model against hand-computed values: memory
// capacity is MiB - ceil(7.5%) (- 64 on arm64), kube-reserved memory 11*pods+255 MiB, eviction
// 100Mi, ephemeral storage 20Gi - 1Gi - 10%.
func TestCapacityAndAllocatable(t *testing.T) {
	cat := loadCatalog(t)
	for _, tc := range []struct {
		name                string
		capacity, allocated map[corev1.ResourceName]string
	}{
		{
			// The AWS provider's documented worked example.
			name:      "m5.large",
			capacity:  map[corev1.ResourceName]string{"cpu": "2", "memory": "7577Mi", "pods": "29", "ephemeral-storage": "20Gi"},
			allocated: map[corev1.ResourceName]string{"cpu": "1930m", "memory": "6903Mi", "pods": "29", "ephemeral-storage": "17Gi"},
		},
		{
			// arm64 loses 64 MiB more: 8192 - 615 - 64.
			name:      "m6g.large",
			capacity:  map[corev1.ResourceName]string{"cpu": "2", "memory": "7513Mi", "pods": "29"},
			allocated: map[corev1.ResourceName]string{"cpu": "1930m", "memory": "6839Mi"},
		},
		{
			// 1024 - ceil(76.8) = 947; 947 - (11*4+255) - 100 = 548.
			name:      "t3.micro",
			capacity:  map[corev1.ResourceName]string{"cpu": "2", "memory": "947Mi", "pods": "4"},
			allocated: map[corev1.ResourceName]string{"cpu": "1930m", "memory": "548Mi", "pods": "4"},
		},
		{
			// 16384 - 1229 = 15155; 15155 - (11*58+255) - 100 = 14162; 4 cores reserve 80m.
			name:      "g5.xlarge",
			capacity:  map[corev1.ResourceName]string{"cpu": "4", "memory": "15155Mi", "pods": "58", ResourceNvidiaGPU: "1"},
			allocated: map[corev1.ResourceName]string{"cpu": "3920m", "memory": "14162Mi", ResourceNvidiaGPU: "1"},
		},
		{
			name:      "g4ad.xlarge",
			capacity:  map[corev1.ResourceName]string{"pods": "8", ResourceAMDGPU: "1"},
			allocated: map[corev1.ResourceName]string{ResourceAMDGPU: "1"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			info, ok := cat.InstanceType("us-east-1", tc.name)
			if !ok {
				t.Fatalf("%s is not in the catalog", tc.name)
			}
			tt := newTypeTemplate("us-east-1", info)
			it := tt.build([]string{"us-east-1a", "us-east-1b"}, func(string, string, string) bool { return false })
			if it == nil {
				t.Fatalf("%s has no offering in us-east-1a or b", tc.name)
			}
			checkResources(t, "capacity", it.Capacity, tc.capacity)
			checkResources(t, "allocatable", it.Allocatable(), tc.allocated)
			if _, ok := it.Capacity[ResourceNvidiaGPU]; ok && info.GPUManufacturer != "NVIDIA" {
				t.Errorf("capacity has %s but the GPUs are %s", ResourceNvidiaGPU, info.GPUManufacturer)
			}
		})
	}
}

func checkResources(t *testing.T, what string, got corev1.ResourceList, want map[corev1.ResourceName]string) {
	t.Helper()
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("%s has no %s, want %s", what, name, w)
			continue
		}
		if g.Cmp(resource.MustParse(w)) != 0 {
			t.Errorf("%s %s = %s, want %s", what, name, g.String(), w)
		}
	}
}

// TestInstanceTypeRequirementsAndOfferings checks that a built type allows exactly its labels,
// the class's zones it is offered in, both capacity types and the region, that absent optional
// labels are required absent, and that each offering carries its zone, capacity type and price.
func TestInstanceTypeRequirementsAndOfferings(t *testing.T) {
	cat := loadCatalog(t)
	info, _ := cat.InstanceType("us-east-1", "m5.large")
	tt := newTypeTemplate("us-east-1", info)
	// m5.large is not sold in us-east-1e: asking for it and 1a leaves 1a only.
	shortOf := map[string]bool{"us-east-1a/spot": true}
	it := tt.build([]string{"us-east-1a", "us-east-1e"}, func(_, zone, ct string) bool { return shortOf[zone+"/"+ct] })

	for key, want := range map[string][]string{
		karpv1.LabelInstanceType:              {"m5.large"},
		karpv1.LabelArch:                      {"amd64"},
		karpv1.LabelOS:                        {"linux"},
		karpv1.LabelTopologyRegion:            {"us-east-1"},
		karpv1.LabelTopologyZone:              {"us-east-1a"},
		karpv1.CapacityTypeLabelKey:           {"on-demand", "spot"},
		catalog.LabelInstanceFamily:           {"m5"},
		catalog.LabelInstanceCPU:              {"2"},
		catalog.LabelInstanceMemory:           {"8192"},
		catalog.LabelInstanceCategory:         {"m"},
		catalog.LabelInstanceGeneration:       {"5"},
		catalog.LabelInstanceSize:             {"large"},
		catalog.LabelInstanceHypervisor:       {"nitro"},
		catalog.LabelZoneID:                   {"use1-az6"},
		catalog.LabelInstanceNetworkBandwidth: {"750"},
	} {
		r, ok := it.Requirements.Get(key)
		if !ok {
			t.Errorf("no requirement on %s", key)
			continue
		}
		if got := r.Values(); !slices.Equal(got, want) {
			t.Errorf("%s allows %v, want %v", key, got, want)
		}
	}
	gpu, ok := it.Requirements.Get(catalog.LabelInstanceGPUCount)
	if !ok || !gpu.AllowsAbsent() || gpu.Has("1") {
		t.Errorf("a type without GPUs must require %s absent, got %v (defined %t)", catalog.LabelInstanceGPUCount, gpu, ok)
	}
	wantGPU := requirements.New(requirements.Exists(catalog.LabelInstanceGPUCount))
	if _, conflict := wantGPU.FirstConflict(it.Requirements); !conflict {
		t.Errorf("requiring a GPU count does not conflict with m5.large")
	}

	if len(it.Offerings) != 2 {
		t.Fatalf("got %d offerings, want on-demand and spot in us-east-1a", len(it.Offerings))
	}
	for _, o := range it.Offerings {
		var want catalog.Offering
		for _, co := range info.Offerings {
			if co.Zone == o.Zone() && co.CapacityType == o.CapacityType() {
				want = co
			}
		}
		if want.Zone == "" {
			t.Errorf("offering %s/%s is not in the catalog", o.Zone(), o.CapacityType())
			continue
		}
		if o.Price != want.Price {
			t.Errorf("offering %s/%s costs %v, the catalog says %v", o.Zone(), o.CapacityType(), o.Price, want.Price)
		}
		if wantAvailable := !shortOf[o.Zone()+"/"+o.CapacityType()]; o.Available != wantAvailable {
			t.Errorf("offering %s/%s available = %t, want %t", o.Zone(), o.CapacityType(), o.Available, wantAvailable)
		}
	}

	if none := tt.build([]string{"us-east-1e"}, func(string, string, string) bool { return false }); none != nil {
		t.Errorf("m5.large is not sold in us-east-1e but was built with %d offerings", len(none.Offerings))
	}
}

// TestTypeCacheRebuildsOnShortage checks that the cache serves the same instance types until the
// announced shortages change.
func TestTypeCacheRebuildsOnShortage(t *testing.T) {
	cache := newTypeCache(loadCatalog(t))
	f := &Failures{}
	zones := []string{"us-east-1a", "us-east-1b"}
	first := cache.get("us-east-1", zones, f)
	if again := cache.get("us-east-1", zones, f); again.types[0] != first.types[0] {
		t.Errorf("second call rebuilt the instance types without a change")
	}
	f.AddInsufficientCapacity(Shortage{InstanceType: "m5.large", Zone: "us-east-1b"})
	after := cache.get("us-east-1", zones, f)
	it := after.templates["m5.large"]
	if it == nil {
		t.Fatalf("m5.large missing after rebuild")
	}
	for _, typ := range after.types {
		if typ.Name != "m5.large" {
			continue
		}
		for _, o := range typ.Offerings {
			if want := o.Zone() != "us-east-1b"; o.Available != want {
				t.Errorf("m5.large %s/%s available = %t, want %t", o.Zone(), o.CapacityType(), o.Available, want)
			}
		}
	}
	f.AddInsufficientCapacity(Shortage{InstanceType: "c5.large", Unannounced: true})
	for _, typ := range cache.get("us-east-1", zones, f).types {
		if typ.Name != "c5.large" {
			continue
		}
		for _, o := range typ.Offerings {
			if !o.Available {
				t.Errorf("an unannounced shortage made c5.large %s/%s unavailable", o.Zone(), o.CapacityType())
			}
		}
	}
}
