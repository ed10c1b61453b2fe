package aws

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	testingclock "k8s.io/utils/clock/testing"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/requirements"
)

func TestSplitFamily(t *testing.T) {
	for _, tc := range []struct {
		name, category, family, size string
		generation                   int
	}{
		{"m5.large", "m", "m5", "large", 5},
		{"c7i-flex.2xlarge", "c", "c7i-flex", "2xlarge", 7},
		{"m6gd.metal", "m", "m6gd", "metal", 6},
		{"u-6tb1.metal", "u", "u-6tb1", "metal", 6},
		{"trn1n.32xlarge", "trn", "trn1n", "32xlarge", 1},
		{"mac2-m2pro.metal", "mac", "mac2-m2pro", "metal", 2},
	} {
		c, f, g, s := splitFamily(tc.name)
		if c != tc.category || f != tc.family || g != tc.generation || s != tc.size {
			t.Errorf("splitFamily(%q) = %q %q %d %q, want %q %q %d %q", tc.name, c, f, g, s, tc.category, tc.family, tc.generation, tc.size)
		}
	}
}

func TestLabelsFromDescribeInstanceTypes(t *testing.T) {
	info := m5Large()
	got := info.labels("linux")
	want := map[string]string{
		"node.kubernetes.io/instance-type":              "m5.large",
		"kubernetes.io/arch":                            "amd64",
		"kubernetes.io/os":                              "linux",
		awsv1.LabelInstanceCategory:                     "m",
		awsv1.LabelInstanceFamily:                       "m5",
		awsv1.LabelInstanceGeneration:                   "5",
		awsv1.LabelInstanceSize:                         "large",
		awsv1.LabelInstanceCPU:                          "2",
		awsv1.LabelInstanceMemory:                       "8192",
		awsv1.LabelInstanceHypervisor:                   "nitro",
		awsv1.LabelInstanceNetworkBandwidth:             "750",
		awsv1.LabelInstanceEBSBandwidth:                 "4750",
		awsv1.LabelInstanceCPUManufacturer:              "intel",
		awsv1.LabelInstanceCPUSustainedClockSpeedMhz:    "3100",
		awsv1.LabelInstanceEncryptionInTransitSupported: "false",
		awsv1.LabelInstanceCapabilityFlex:               "false",
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("label %s = %q, want %q", k, got[k], v)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("unexpected label %s=%s", k, got[k])
		}
	}
	if info.MaxPods != 29 || !info.SpotSupported || !slices.Equal(info.Zones, []string{"us-east-1a", "us-east-1b"}) {
		t.Errorf("info = %+v", info)
	}
	if _, ok := infoFromEC2(ec2Type("mac1.metal", "x86_64_mac", 12, 32768, 8, 30), []string{"a"}); ok {
		t.Error("a type without an amd64 or arm64 architecture was accepted")
	}
}

// testClass is a Ready EC2NodeClass with subnets in us-east-1a and us-east-1b and an amd64 AMI.
func testClass() *awsv1.EC2NodeClass {
	nc := &awsv1.EC2NodeClass{}
	nc.Name = "default"
	nc.Spec.AMIFamily = aws.String(awsv1.AMIFamilyAL2023)
	nc.Status.Subnets = []awsv1.Subnet{
		{ID: "subnet-a", Zone: "us-east-1a", ZoneID: "use1-az1"},
		{ID: "subnet-b", Zone: "us-east-1b", ZoneID: "use1-az2"},
		{ID: "subnet-b2", Zone: "us-east-1b", ZoneID: "use1-az2"},
	}
	nc.Status.SecurityGroups = []awsv1.SecurityGroup{{ID: "sg-1"}}
	nc.Status.AMIs = []awsv1.AMI{{ID: "ami-amd64", Requirements: []corev1.NodeSelectorRequirement{
		{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}},
	}}}
	return nc
}

func newTestBuilder(t *testing.T, api *fakeEC2) (*typeBuilder, *testingclock.FakeClock) {
	t.Helper()
	cat := loadCatalog(t)
	clk := testingclock.NewFakeClock(time.Now())
	src := &typeSource{api: api, region: "us-east-1", catalog: cat}
	if err := src.refresh(context.Background(), clk.Now()); err != nil {
		t.Fatal(err)
	}
	return &typeBuilder{source: src, pricing: NewPricing(cat, "us-east-1"), unavailable: NewUnavailableOfferings(clk, 0),
		region: "us-east-1", built: map[uint64]*builtTypes{}}, clk
}

func TestBuildInstanceTypes(t *testing.T) {
	api := &fakeEC2{
		types: []ec2types.InstanceTypeInfo{
			ec2Type("m5.large", "x86_64", 2, 8192, 3, 10),
			ec2Type("m6g.large", "arm64", 2, 8192, 3, 10),
			ec2Type("c5.large", "x86_64", 2, 4096, 3, 10),
			ec2Type("x9.unpriced", "x86_64", 2, 4096, 3, 10),
		},
		offerings: []ec2types.InstanceTypeOffering{
			offering("m5.large", "us-east-1a"), offering("m5.large", "us-east-1b"), offering("m5.large", "us-east-1c"),
			offering("m6g.large", "us-east-1a"), offering("c5.large", "us-east-1c"), offering("x9.unpriced", "us-east-1a"),
		},
	}
	b, _ := newTestBuilder(t, api)
	view, err := newClassView(testClass(), DefaultVMMemoryOverheadPercent, 0)
	if err != nil {
		t.Fatal(err)
	}
	built, err := b.get(view)
	if err != nil {
		t.Fatal(err)
	}
	// m6g.large has no arm64 AMI, c5.large is not offered in the class's zones.
	if got := built.types.Names(); !slices.Equal(got, []string{"m5.large", "x9.unpriced"}) {
		t.Fatalf("types = %v, want m5.large and x9.unpriced", got)
	}
	m5 := built.byName["m5.large"]
	if m5.ami != "ami-amd64" {
		t.Errorf("m5.large AMI = %q", m5.ami)
	}
	zones, _ := m5.it.Requirements.Get(karpv1.LabelTopologyZone)
	if !slices.Equal(zones.Values(), []string{"us-east-1a", "us-east-1b"}) {
		t.Errorf("zones = %v, want the class's zones that offer the type", zones.Values())
	}
	if ids, _ := m5.it.Requirements.Get(awsv1.LabelTopologyZoneID); !slices.Equal(ids.Values(), []string{"use1-az1", "use1-az2"}) {
		t.Errorf("zone IDs = %v", ids.Values())
	}
	if gpu, _ := m5.it.Requirements.Get(awsv1.LabelInstanceGPUName); gpu.Operator() != corev1.NodeSelectorOpDoesNotExist {
		t.Errorf("gpu-name requirement = %v, want DoesNotExist", gpu)
	}
	if len(m5.it.Offerings) != 4 {
		t.Fatalf("offerings = %d, want 2 zones x 2 capacity types", len(m5.it.Offerings))
	}
	for _, o := range m5.it.Offerings {
		if !o.Available || o.Price <= 0 {
			t.Errorf("offering %s/%s unavailable or unpriced: %+v", o.Zone(), o.CapacityType(), o)
		}
	}
	for _, o := range built.byName["x9.unpriced"].it.Offerings {
		if o.Available {
			t.Errorf("an offering without a price is available: %s/%s", o.Zone(), o.CapacityType())
		}
	}

	// The same view is served from the cache.
	if again, _ := b.get(view); again != built {
		t.Error("an unchanged view was rebuilt")
	}
	// A capacity error rebuilds the types with that offering unavailable.
	b.unavailable.MarkUnavailable("m5.large", "us-east-1a", karpv1.CapacityTypeSpot)
	rebuilt, _ := b.get(view)
	if rebuilt == built {
		t.Fatal("types were not rebuilt after a capacity error")
	}
	spot1a := requirements.New(requirements.In(karpv1.LabelTopologyZone, "us-east-1a"), requirements.In(karpv1.CapacityTypeLabelKey, karpv1.CapacityTypeSpot))
	if _, ok := rebuilt.byName["m5.large"].it.CheapestOffering(spot1a); ok {
		t.Error("m5.large spot in us-east-1a is still available")
	}
	// A zone whose subnets are all out of addresses has no available offering.
	b.unavailable.MarkSubnetUnavailable("subnet-b")
	b.unavailable.MarkSubnetUnavailable("subnet-b2")
	rebuilt, _ = b.get(view)
	for _, o := range rebuilt.byName["m5.large"].it.Offerings {
		if o.Zone() == "us-east-1b" && o.Available {
			t.Error("an offering in a zone without free subnets is available")
		}
	}
}

func TestTypeSourceFallsBackToCatalog(t *testing.T) {
	cat := loadCatalog(t)
	src := &typeSource{api: &fakeEC2{err: errors.New("no route to EC2")}, region: "us-east-1", catalog: cat}
	if err := src.refresh(context.Background(), time.Now()); err == nil {
		t.Fatal("refresh succeeded without EC2")
	}
	infos, _, origin := src.snapshot()
	if origin != TypeSourceCatalog || len(infos) != len(cat.InstanceTypes("us-east-1")) {
		t.Errorf("origin %s with %d types, want the catalog's %d", origin, len(infos), len(cat.InstanceTypes("us-east-1")))
	}
	// Once EC2 answers, its types replace the catalog's.
	src.api = &fakeEC2{types: []ec2types.InstanceTypeInfo{ec2Type("m5.large", "x86_64", 2, 8192, 3, 10)}, offerings: []ec2types.InstanceTypeOffering{offering("m5.large", "us-east-1a")}}
	if err := src.refresh(context.Background(), time.Now()); err != nil {
		t.Fatal(err)
	}
	infos, _, origin = src.snapshot()
	if origin != TypeSourceEC2 || len(infos) != 1 {
		t.Errorf("origin %s with %d types after EC2 answered", origin, len(infos))
	}
	// A failed refresh keeps what EC2 said last.
	src.api = &fakeEC2{err: errors.New("throttled")}
	_ = src.refresh(context.Background(), time.Now())
	if infos, _, origin = src.snapshot(); origin != TypeSourceEC2 || len(infos) != 1 {
		t.Errorf("a failed refresh replaced EC2's types: %s, %d", origin, len(infos))
	}
}

func TestCatalogTypesMatchEC2Formulas(t *testing.T) {
	// The offline fallback must shape nodes like DescribeInstanceTypes does.
	cat := loadCatalog(t)
	ct, _ := cat.InstanceType("us-east-1", "m5.large")
	fromCatalog := infoFromCatalog(ct)
	fromEC2 := m5Large()
	s := nodeShape{Family: awsv1.AMIFamilyAL2023, VMMemoryOverheadPercent: DefaultVMMemoryOverheadPercent}
	a, b := s.capacity(&fromCatalog), s.capacity(&fromEC2)
	for _, n := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods} {
		qa, qb := a[n], b[n]
		if qa.Cmp(qb) != 0 {
			t.Errorf("%s: catalog %s, EC2 %s", n, qa.String(), qb.String())
		}
	}
}
