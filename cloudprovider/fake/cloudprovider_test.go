package fake_test

import (
	"context"
	"errors"
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
	"github.com/joiner-dev/joiner/requirements"
)

func TestInstanceTypesMatchBenchmarkSpec(t *testing.T) {
	its := fake.InstanceTypes(400)
	if len(its) != 400 {
		t.Fatalf("%d types", len(its))
	}
	for _, i := range []int{0, 3, 4, 399} {
		it, n := its[i], int64(i+1)
		if it.Name != "fake-it-"+itoa(i) {
			t.Errorf("name %s", it.Name)
		}
		c, m, p := it.Capacity[corev1.ResourceCPU], it.Capacity[corev1.ResourceMemory], it.Capacity[corev1.ResourcePods]
		if c.Value() != n || m.Value() != 2*n<<30 || p.Value() != 10*n {
			t.Errorf("%s capacity %v", it.Name, it.Capacity)
		}
		a := it.Allocatable()
		ac, am := a[corev1.ResourceCPU], a[corev1.ResourceMemory]
		if ac.MilliValue() != 1000*n-100 || am.Value() != 2*n<<30-10<<20 {
			t.Errorf("%s allocatable %v", it.Name, a)
		}
		wantPrice := 0.1*float64(n) + 0.1*float64(2*n<<30)/1e9
		if len(it.Offerings) != 5 {
			t.Fatalf("%s has %d offerings", it.Name, len(it.Offerings))
		}
		for _, o := range it.Offerings {
			if math.Abs(o.Price-wantPrice) > 1e-9 || !o.Available {
				t.Errorf("%s offering %s/%s price %v available %v", it.Name, o.Zone(), o.CapacityType(), o.Price, o.Available)
			}
		}
		size := "small"
		if n >= 5 {
			size = "large"
		}
		labels := it.Requirements.Labels()
		if labels[fake.LabelSize] != size || labels[fake.LabelInteger] != itoa(i+1) || labels[karpv1.LabelArch] != "amd64" {
			t.Errorf("%s labels %v", it.Name, labels)
		}
		special, _ := it.Requirements.Get(fake.LabelSpecial)
		if special.AllowsAbsent() != (n <= 4) || special.Has("optional") != (n >= 5) {
			t.Errorf("%s special %s", it.Name, special)
		}
		zones, _ := it.Requirements.Get(karpv1.LabelTopologyZone)
		if zones.Len() != 3 {
			t.Errorf("%s zones %s", it.Name, zones)
		}
	}
	// One unit costs 0.3147483648 $/h.
	if p := its[0].Offerings[0].Price; math.Abs(p-0.3147483648) > 1e-12 {
		t.Errorf("unit price %v", p)
	}
	// No spot offering in zone 3.
	z3spot := requirements.New(requirements.In(karpv1.LabelTopologyZone, fake.Zone3), requirements.In(karpv1.CapacityTypeLabelKey, "spot"))
	if its[0].CompatibleWith(z3spot) {
		t.Error("spot in test-zone-3 should not exist")
	}
}

func itoa(i int) string { return resource.NewQuantity(int64(i), resource.DecimalSI).String() }

func nodeClaim(nodePool string, requests corev1.ResourceList, reqs ...karpv1.NodeSelectorRequirementWithMinValues) *karpv1.NodeClaim {
	nc := &karpv1.NodeClaim{}
	nc.Name = "nc"
	nc.Labels = map[string]string{karpv1.NodePoolLabelKey: nodePool, "team": "a"}
	nc.Spec.Requirements = reqs
	nc.Spec.Resources.Requests = requests
	return nc
}

func TestCreatePicksCheapestCompatible(t *testing.T) {
	ctx := context.Background()
	tests := []struct {
		name     string
		reqs     []karpv1.NodeSelectorRequirementWithMinValues
		requests corev1.ResourceList
		ice      []fake.CapacityPool
		wantType string
		wantZone string
		wantCT   string
		wantICE  bool
		wantErr  bool
	}{
		{name: "smallest that fits", requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
			wantType: "fake-it-2", wantZone: fake.Zone1, wantCT: "spot"},
		{name: "zone 3 is on-demand only", reqs: []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelTopologyZone, Operator: "In", Values: []string{fake.Zone3}}},
			wantType: "fake-it-0", wantZone: fake.Zone3, wantCT: "on-demand"},
		{name: "gt on integer label", reqs: []karpv1.NodeSelectorRequirementWithMinValues{{Key: fake.LabelInteger, Operator: "Gt", Values: []string{"5"}}},
			wantType: "fake-it-5", wantZone: fake.Zone1, wantCT: "spot"},
		{name: "skips exhausted offerings", ice: []fake.CapacityPool{{InstanceType: "fake-it-0", CapacityType: "spot"}, {Zone: fake.Zone1}},
			wantType: "fake-it-0", wantZone: fake.Zone2, wantCT: "on-demand"},
		{name: "insufficient capacity when all exhausted", reqs: []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.LabelInstanceType, Operator: "In", Values: []string{"fake-it-1"}}},
			ice: []fake.CapacityPool{{InstanceType: "fake-it-1"}}, wantICE: true},
		{name: "nothing fits", requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100")}, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cp := fake.New()
			cp.InsufficientCapacity = tt.ice
			got, err := cp.Create(ctx, nodeClaim("default", tt.requests, tt.reqs...))
			switch {
			case tt.wantICE:
				ice, ok := cloudprovider.AsInsufficientCapacity(err)
				if !ok || ice.InstanceType != "fake-it-1" {
					t.Fatalf("want ICE for fake-it-1, got %v", err)
				}
				return
			case tt.wantErr:
				if err == nil || cloudprovider.IsInsufficientCapacity(err) {
					t.Fatalf("want a plain error, got %v", err)
				}
				return
			case err != nil:
				t.Fatal(err)
			}
			l := got.Labels
			if l[karpv1.LabelInstanceType] != tt.wantType || l[karpv1.LabelTopologyZone] != tt.wantZone || l[karpv1.CapacityTypeLabelKey] != tt.wantCT {
				t.Fatalf("launched %s in %s as %s", l[karpv1.LabelInstanceType], l[karpv1.LabelTopologyZone], l[karpv1.CapacityTypeLabelKey])
			}
			if l["team"] != "a" || l[karpv1.NodePoolLabelKey] != "default" || got.Status.ProviderID == "" {
				t.Fatalf("labels %v, provider id %q", l, got.Status.ProviderID)
			}
			if a := got.Status.Allocatable[corev1.ResourceCPU]; a.MilliValue()%1000 != 900 {
				t.Fatalf("allocatable cpu %s", a.String())
			}
		})
	}
}

func TestLifecycleAndRecording(t *testing.T) {
	ctx := context.Background()
	cp := fake.New(fake.InstanceTypes(3)...)
	a, err := cp.Create(ctx, nodeClaim("default", nil))
	if err != nil {
		t.Fatal(err)
	}
	b, err := cp.Create(ctx, nodeClaim("default", nil))
	if err != nil {
		t.Fatal(err)
	}
	if a.Status.ProviderID == b.Status.ProviderID {
		t.Fatal("provider ids collide")
	}
	if got, err := cp.Get(ctx, a.Status.ProviderID); err != nil || got.Status.ProviderID != a.Status.ProviderID {
		t.Fatalf("Get: %v %v", got, err)
	}
	if list, _ := cp.List(ctx); len(list) != 2 {
		t.Fatalf("List: %d", len(list))
	}
	if err := cp.Delete(ctx, a); err != nil {
		t.Fatal(err)
	}
	if err := cp.Delete(ctx, a); !cloudprovider.IsNodeClaimNotFound(err) {
		t.Fatalf("second Delete: %v", err)
	}
	if _, err := cp.Get(ctx, a.Status.ProviderID); !cloudprovider.IsNodeClaimNotFound(err) {
		t.Fatalf("Get after delete: %v", err)
	}
	boom := errors.New("boom")
	cp.FailNextCreate(boom)
	if _, err := cp.Create(ctx, nodeClaim("default", nil)); !errors.Is(err, boom) {
		t.Fatalf("injected create error: %v", err)
	}
	if _, err := cp.Create(ctx, nodeClaim("default", nil)); err != nil {
		t.Fatalf("error should fire once: %v", err)
	}
	cp.FailNextDelete(boom)
	if err := cp.Delete(ctx, b); !errors.Is(err, boom) {
		t.Fatalf("injected delete error: %v", err)
	}
	cp.FailNextGet(boom)
	if _, err := cp.Get(ctx, b.Status.ProviderID); !errors.Is(err, boom) {
		t.Fatalf("injected get error: %v", err)
	}
	if len(cp.CreateCalls()) != 4 || len(cp.DeleteCalls()) != 3 || len(cp.GetCalls()) != 3 {
		t.Fatalf("calls: %d create, %d delete, %d get", len(cp.CreateCalls()), len(cp.DeleteCalls()), len(cp.GetCalls()))
	}
	cp.Drifted = "ImageChanged"
	if r, _ := cp.IsDrifted(ctx, b); r != "ImageChanged" {
		t.Fatalf("drift %q", r)
	}
	np := &karpv1.NodePool{}
	np.Name = "gpu"
	cp.ErrorsForNodePool = map[string]error{"gpu": boom}
	if _, err := cp.GetInstanceTypes(ctx, np); !errors.Is(err, boom) {
		t.Fatalf("instance type error: %v", err)
	}
	cp.Reset()
	if len(cp.CreateCalls()) != 0 {
		t.Fatal("Reset kept calls")
	}
	if list, _ := cp.List(ctx); len(list) != 0 {
		t.Fatal("Reset kept machines")
	}
}
