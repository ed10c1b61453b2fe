package catalog_test

import (
	"cmp"
	"maps"
	"slices"
	"sync"
	"testing"

	"github.com/joiner-dev/joiner/providers/catalog"
)

func mustLoad(t *testing.T) *catalog.Catalog {
	t.Helper()
	c, err := catalog.Load()
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c
}

var requiredRegions = []string{"eu-west-1", "us-east-1", "us-west-2"}

func TestLoadIsSharedAndConcurrent(t *testing.T) {
	var wg sync.WaitGroup
	got := make([]*catalog.Catalog, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := catalog.Load()
			if err != nil {
				t.Errorf("Load: %v", err)
				return
			}
			got[i] = c
			_ = c.InstanceTypes("us-east-1")
		}()
	}
	wg.Wait()
	for i, c := range got {
		if c == nil || c != got[0] {
			t.Fatalf("Load #%d returned %p, want the shared %p", i, c, got[0])
		}
	}
}

func TestRegionsAndZones(t *testing.T) {
	c := mustLoad(t)
	regions := c.Regions()
	if !slices.IsSorted(regions) {
		t.Errorf("Regions() not sorted: %v", regions)
	}
	for _, r := range requiredRegions {
		if !slices.Contains(regions, r) {
			t.Fatalf("region %s missing from %v", r, regions)
		}
		zones := c.Zones(r)
		if len(zones) < 3 {
			t.Errorf("%s: %d zones, want >= 3", r, len(zones))
		}
		for _, z := range zones {
			if z.ID == "" || len(z.Name) <= len(r) || z.Name[:len(r)] != r {
				t.Errorf("%s: bad zone %+v", r, z)
			}
		}
	}
	if z := c.Zones("mars-north-1"); z != nil {
		t.Errorf("Zones(unknown) = %v, want nil", z)
	}
	if ts := c.InstanceTypes("mars-north-1"); ts != nil {
		t.Errorf("InstanceTypes(unknown) returned %d types, want nil", len(ts))
	}
	if src := c.Sources(); len(src) != 2 || src[0].License != "Apache-2.0" || src[1].License != "MIT" {
		t.Errorf("Sources() = %+v, want moto (Apache-2.0) and ec2-instances-info (MIT)", src)
	}
}

func TestCoverage(t *testing.T) {
	c := mustLoad(t)
	for _, r := range requiredRegions {
		types := c.InstanceTypes(r)
		if len(types) < 300 {
			t.Errorf("%s: %d types, want >= 300", r, len(types))
		}
		categories := map[string]int{}
		arches := map[string]int{}
		zonesUsed := map[string]bool{}
		for _, it := range types {
			categories[it.Category]++
			for _, a := range it.Architectures {
				arches[a]++
			}
			for _, o := range it.Offerings {
				zonesUsed[o.Zone] = true
			}
		}
		for _, cat := range []string{"c", "m", "r", "t", "g"} {
			if categories[cat] == 0 {
				t.Errorf("%s: no type of category %q (have %v)", r, cat, categories)
			}
		}
		for _, a := range []string{"amd64", "arm64"} {
			if arches[a] == 0 {
				t.Errorf("%s: no %s type", r, a)
			}
		}
		if len(zonesUsed) < 3 {
			t.Errorf("%s: offerings span %d zones, want >= 3", r, len(zonesUsed))
		}
	}
}

func TestKnownTypes(t *testing.T) {
	c := mustLoad(t)
	tests := []struct {
		name                      string
		arch                      string
		vcpu                      int
		memMiB                    int64
		gpus                      int
		gpuName, gpuMaker         string
		maxPods                   int
		hypervisor                string
		bareMetal                 bool
		category, family, size    string
		generation                int
		wantNVMe, wantSpotSupport bool
	}{
		{name: "m5.large", arch: "amd64", vcpu: 2, memMiB: 8192, maxPods: 29, hypervisor: "nitro", category: "m", family: "m5", size: "large", generation: 5, wantSpotSupport: true},
		{name: "m7g.large", arch: "arm64", vcpu: 2, memMiB: 8192, maxPods: 29, hypervisor: "nitro", category: "m", family: "m7g", size: "large", generation: 7, wantSpotSupport: true},
		{name: "c7i-flex.large", arch: "amd64", vcpu: 2, memMiB: 4096, hypervisor: "nitro", category: "c", family: "c7i-flex", size: "large", generation: 7, wantSpotSupport: true, maxPods: -1},
		{name: "t4g.micro", arch: "arm64", vcpu: 2, memMiB: 1024, hypervisor: "nitro", category: "t", family: "t4g", size: "micro", generation: 4, wantSpotSupport: true, maxPods: 4},
		{name: "g5.xlarge", arch: "amd64", vcpu: 4, memMiB: 16384, gpus: 1, gpuName: "A10G", gpuMaker: "NVIDIA", hypervisor: "nitro", category: "g", family: "g5", size: "xlarge", generation: 5, wantNVMe: true, wantSpotSupport: true, maxPods: 58},
		{name: "g4dn.12xlarge", arch: "amd64", vcpu: 48, memMiB: 196608, gpus: 4, gpuName: "T4", gpuMaker: "NVIDIA", hypervisor: "nitro", category: "g", family: "g4dn", size: "12xlarge", generation: 4, wantNVMe: true, wantSpotSupport: true, maxPods: -1},
		{name: "m5.metal", arch: "amd64", vcpu: 96, memMiB: 393216, bareMetal: true, category: "m", family: "m5", size: "metal", generation: 5, wantSpotSupport: true, maxPods: 737},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			it, ok := c.InstanceType("us-east-1", tc.name)
			if !ok {
				t.Fatalf("%s not offered in us-east-1", tc.name)
			}
			if it.Name != tc.name || it.Architectures[0] != tc.arch || it.VCPU != tc.vcpu || it.MemoryMiB != tc.memMiB {
				t.Errorf("got %s arch=%v vcpu=%d mem=%d, want arch=%s vcpu=%d mem=%d", it.Name, it.Architectures, it.VCPU, it.MemoryMiB, tc.arch, tc.vcpu, tc.memMiB)
			}
			if it.Category != tc.category || it.Family != tc.family || it.Size != tc.size || it.Generation != tc.generation {
				t.Errorf("name parts = %q %q %q %d, want %q %q %q %d", it.Category, it.Family, it.Size, it.Generation, tc.category, tc.family, tc.size, tc.generation)
			}
			if it.GPUCount != tc.gpus || it.GPUName != tc.gpuName || it.GPUManufacturer != tc.gpuMaker {
				t.Errorf("GPU = %d %q %q, want %d %q %q", it.GPUCount, it.GPUName, it.GPUManufacturer, tc.gpus, tc.gpuName, tc.gpuMaker)
			}
			if tc.gpus > 0 && it.GPUMemoryMiB <= 0 {
				t.Errorf("GPU memory = %d, want > 0", it.GPUMemoryMiB)
			}
			if it.Hypervisor != tc.hypervisor || it.BareMetal != tc.bareMetal {
				t.Errorf("hypervisor=%q bareMetal=%v, want %q %v", it.Hypervisor, it.BareMetal, tc.hypervisor, tc.bareMetal)
			}
			if (it.LocalNVMeGB > 0) != tc.wantNVMe {
				t.Errorf("LocalNVMeGB = %d, want NVMe=%v", it.LocalNVMeGB, tc.wantNVMe)
			}
			if it.SpotSupported != tc.wantSpotSupport {
				t.Errorf("SpotSupported = %v", it.SpotSupported)
			}
			if tc.maxPods >= 0 && it.MaxPods != tc.maxPods {
				t.Errorf("MaxPods = %d, want %d", it.MaxPods, tc.maxPods)
			}
			if it.NetworkBandwidthMbps <= 0 {
				t.Errorf("NetworkBandwidthMbps = %d, want > 0", it.NetworkBandwidthMbps)
			}
		})
	}
}

func TestEveryType(t *testing.T) {
	c := mustLoad(t)
	for _, r := range c.Regions() {
		types := c.InstanceTypes(r)
		if !slices.IsSortedFunc(types, func(a, b catalog.InstanceType) int { return cmp.Compare(a.Name, b.Name) }) {
			t.Errorf("%s: types not sorted by name", r)
		}
		zoneIDs := map[string]string{}
		for _, z := range c.Zones(r) {
			zoneIDs[z.Name] = z.ID
		}
		for _, it := range types {
			if want := it.MaxENIs*(it.IPv4PerENI-1) + 2; it.MaxPods != want || it.MaxPods < 4 {
				t.Errorf("%s: MaxPods = %d, want %d*(%d-1)+2 = %d", it.Name, it.MaxPods, it.MaxENIs, it.IPv4PerENI, want)
			}
			if it.VCPU <= 0 || it.MemoryMiB <= 0 || len(it.Architectures) == 0 {
				t.Errorf("%s: incomplete spec %+v", it.Name, it)
			}
			if len(it.Offerings) == 0 {
				t.Errorf("%s in %s: no offerings", it.Name, r)
			}
			for i, o := range it.Offerings {
				if o.Region != r || zoneIDs[o.Zone] != o.ZoneID || o.ZoneID == "" {
					t.Errorf("%s: offering %+v does not match region %s zones", it.Name, o, r)
				}
				if o.CapacityType != catalog.CapacityTypeOnDemand && o.CapacityType != catalog.CapacityTypeSpot {
					t.Errorf("%s: capacity type %q", it.Name, o.CapacityType)
				}
				if o.CapacityType == catalog.CapacityTypeSpot && !it.SpotSupported {
					t.Errorf("%s: spot offering although spot is unsupported", it.Name)
				}
				if o.Available != (o.Price > 0) || (o.PriceSource == catalog.PriceSourceNone) == o.Available {
					t.Errorf("%s: inconsistent offering %+v", it.Name, o)
				}
				if i > 0 {
					p := it.Offerings[i-1]
					if p.Zone > o.Zone || (p.Zone == o.Zone && p.CapacityType != catalog.CapacityTypeOnDemand) {
						t.Errorf("%s: offerings out of order: %+v then %+v", it.Name, p, o)
					}
				}
			}
		}
	}
}

func TestPrices(t *testing.T) {
	c := mustLoad(t)
	for _, r := range requiredRegions {
		var pairs, cheaper, unavailable, total int
		for _, it := range c.InstanceTypes(r) {
			var od float64
			var spots []float64
			for _, o := range it.Offerings {
				total++
				if !o.Available {
					unavailable++
					continue
				}
				if o.Price <= 0 || o.Price > 500 {
					t.Errorf("%s %s %s: implausible price %v", it.Name, o.Zone, o.CapacityType, o.Price)
				}
				if o.CapacityType == catalog.CapacityTypeOnDemand {
					if od != 0 && od != o.Price {
						t.Errorf("%s in %s: on-demand price differs between zones (%v, %v)", it.Name, r, od, o.Price)
					}
					od = o.Price
				} else {
					spots = append(spots, o.Price)
				}
			}
			for _, s := range spots {
				if od > 0 {
					pairs++
					if s < od {
						cheaper++
					}
				}
			}
		}
		if pairs == 0 || float64(cheaper) < 0.95*float64(pairs) {
			t.Errorf("%s: spot cheaper than on-demand in %d of %d offerings, want >= 95%%", r, cheaper, pairs)
		}
		if float64(unavailable) > 0.1*float64(total) {
			t.Errorf("%s: %d of %d offerings unavailable, want <= 10%%", r, unavailable, total)
		}
	}

	// Spot-price spread: m5.large in us-east-1 has per-zone spot figures, so
	// the zones should not all share one price.
	it, _ := c.InstanceType("us-east-1", "m5.large")
	spot := map[float64]bool{}
	var od float64
	for _, o := range it.Offerings {
		if o.CapacityType == catalog.CapacityTypeSpot {
			spot[o.Price] = true
			if o.PriceSource != catalog.PriceSourceSpotZonal {
				t.Errorf("m5.large %s spot source = %q, want %q", o.Zone, o.PriceSource, catalog.PriceSourceSpotZonal)
			}
		} else {
			od = o.Price
		}
	}
	if len(spot) < 2 || od != 0.096 {
		t.Errorf("m5.large us-east-1: on-demand %v (want 0.096), %d distinct spot prices (want >= 2)", od, len(spot))
	}
}

func TestLabels(t *testing.T) {
	c := mustLoad(t)
	tests := []struct {
		name    string
		want    map[string]string
		without []string
	}{
		{
			name: "m5.large",
			want: map[string]string{
				"node.kubernetes.io/instance-type":             "m5.large",
				"kubernetes.io/arch":                           "amd64",
				"kubernetes.io/os":                             "linux",
				"karpenter.k8s.aws/instance-category":          "m",
				"karpenter.k8s.aws/instance-family":            "m5",
				"karpenter.k8s.aws/instance-generation":        "5",
				"karpenter.k8s.aws/instance-size":              "large",
				"karpenter.k8s.aws/instance-cpu":               "2",
				"karpenter.k8s.aws/instance-memory":            "8192",
				"karpenter.k8s.aws/instance-hypervisor":        "nitro",
				"karpenter.k8s.aws/instance-network-bandwidth": "750",
			},
		},
		{
			name: "m7g.large",
			want: map[string]string{
				"kubernetes.io/arch":                  "arm64",
				"karpenter.k8s.aws/instance-family":   "m7g",
				"karpenter.k8s.aws/instance-category": "m",
			},
			without: []string{"karpenter.k8s.aws/instance-gpu-count", "karpenter.k8s.aws/instance-local-nvme"},
		},
		{
			name: "g5.xlarge",
			want: map[string]string{
				"karpenter.k8s.aws/instance-gpu-name":         "a10g",
				"karpenter.k8s.aws/instance-gpu-manufacturer": "nvidia",
				"karpenter.k8s.aws/instance-gpu-count":        "1",
				"karpenter.k8s.aws/instance-gpu-memory":       "22888",
				"karpenter.k8s.aws/instance-local-nvme":       "250",
			},
		},
		{
			name: "g4ad.xlarge",
			want: map[string]string{
				"karpenter.k8s.aws/instance-gpu-name":         "radeon-pro-v520",
				"karpenter.k8s.aws/instance-gpu-manufacturer": "amd",
			},
		},
		{
			name:    "m5.metal",
			want:    map[string]string{"karpenter.k8s.aws/instance-size": "metal"},
			without: []string{"karpenter.k8s.aws/instance-hypervisor"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			it, ok := c.InstanceType("us-east-1", tc.name)
			if !ok {
				t.Fatalf("%s not offered in us-east-1", tc.name)
			}
			got := it.Labels()
			if tc.name == "m5.large" && !maps.Equal(got, tc.want) {
				t.Errorf("Labels() = %v, want exactly %v", got, tc.want)
			}
			for k, v := range tc.want {
				if got[k] != v {
					t.Errorf("label %s = %q, want %q", k, got[k], v)
				}
			}
			for _, k := range tc.without {
				if v, ok := got[k]; ok {
					t.Errorf("label %s = %q, want absent", k, v)
				}
			}
		})
	}
}

func TestOfferingLabels(t *testing.T) {
	c := mustLoad(t)
	it, _ := c.InstanceType("us-east-1", "m5.large")
	for _, o := range it.Offerings {
		want := map[string]string{
			catalog.LabelRegion:       "us-east-1",
			catalog.LabelZone:         o.Zone,
			catalog.LabelZoneID:       o.ZoneID,
			catalog.LabelCapacityType: o.CapacityType,
		}
		if got := o.Labels(); !maps.Equal(got, want) {
			t.Errorf("Labels() = %v, want %v", got, want)
		}
	}
}

func TestResultsAreCopies(t *testing.T) {
	c := mustLoad(t)
	first := c.InstanceTypes("us-west-2")
	first[0].Name = "changed"
	first[0].Offerings[0].Price = -1
	first[0].Architectures[0] = "changed"
	again := c.InstanceTypes("us-west-2")
	if again[0].Name == "changed" || again[0].Offerings[0].Price == -1 || again[0].Architectures[0] == "changed" {
		t.Fatalf("modifying a result changed the catalog: %+v", again[0])
	}
	r := c.Regions()
	r[0] = "changed"
	if c.Regions()[0] == "changed" {
		t.Fatal("modifying Regions() changed the catalog")
	}
	if _, ok := c.InstanceType("us-west-2", "no.such"); ok {
		t.Error("InstanceType(no.such) found")
	}
}
