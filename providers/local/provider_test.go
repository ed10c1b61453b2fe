package local

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"

	joinerv1alpha1 "github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/providers/catalog"
	"github.com/joiner-dev/joiner/requirements"
	"github.com/joiner-dev/joiner/testbed"
)

// longDelay keeps launched instances from registering in tests that do not step their clock.
var longDelay = &metav1.Duration{Duration: time.Hour}

func TestGetInstanceTypes(t *testing.T) {
	cat := loadCatalog(t)
	for _, tc := range []struct {
		name   string
		spec   joinerv1alpha1.LocalNodeClassSpec
		region string
		zones  []string
	}{
		{name: "every zone of the default region", region: "us-east-1",
			zones: []string{"us-east-1a", "us-east-1b", "us-east-1c", "us-east-1d", "us-east-1e", "us-east-1f"}},
		{name: "one zone", spec: joinerv1alpha1.LocalNodeClassSpec{Zones: []string{"us-east-1b"}}, region: "us-east-1", zones: []string{"us-east-1b"}},
		{name: "another region", spec: joinerv1alpha1.LocalNodeClassSpec{Region: "eu-west-1", Zones: []string{"eu-west-1a", "eu-west-1c"}},
			region: "eu-west-1", zones: []string{"eu-west-1a", "eu-west-1c"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.spec, nil)
			its, err := f.p.GetInstanceTypes(context.Background(), f.nodePool())
			if err != nil {
				t.Fatalf("GetInstanceTypes: %v", err)
			}
			// The oracle: catalog types of the region sold in at least one of the zones.
			want := 0
			for _, info := range cat.InstanceTypes(tc.region) {
				if slices.ContainsFunc(info.Offerings, func(o catalog.Offering) bool { return slices.Contains(tc.zones, o.Zone) }) {
					want++
				}
			}
			if len(its) != want || want < 100 {
				t.Errorf("got %d instance types, want the %d the catalog sells in %v", len(its), want, tc.zones)
			}
			byName := map[string]*cloudprovider.InstanceType{}
			for _, it := range its {
				byName[it.Name] = it
				if r, _ := it.Requirements.Get(karpv1.LabelTopologyRegion); !r.Has(tc.region) {
					t.Fatalf("%s: region requirement %v, want %s", it.Name, r, tc.region)
				}
				for _, o := range it.Offerings {
					if !slices.Contains(tc.zones, o.Zone()) {
						t.Fatalf("%s has an offering in %s, outside the class's zones %v", it.Name, o.Zone(), tc.zones)
					}
				}
				for _, key := range []string{karpv1.LabelInstanceType, karpv1.LabelArch, karpv1.LabelOS, karpv1.LabelTopologyZone, karpv1.CapacityTypeLabelKey} {
					if !it.Requirements.Has(key) {
						t.Fatalf("%s does not define well-known label %s", it.Name, key)
					}
				}
			}
			m5 := byName["m5.large"]
			if m5 == nil {
				t.Fatalf("m5.large missing")
			}
			checkResources(t, "m5.large allocatable", m5.Allocatable(),
				map[corev1.ResourceName]string{"cpu": "1930m", "memory": "6903Mi", "pods": "29", "ephemeral-storage": "17Gi"})
			info, _ := cat.InstanceType(tc.region, "m5.large")
			for _, o := range m5.Offerings {
				i := slices.IndexFunc(info.Offerings, func(co catalog.Offering) bool {
					return co.Zone == o.Zone() && co.CapacityType == o.CapacityType()
				})
				if i < 0 || info.Offerings[i].Price != o.Price || !o.Available {
					t.Errorf("m5.large offering %s/%s at %v (available %t) does not match the catalog", o.Zone(), o.CapacityType(), o.Price, o.Available)
				}
			}
		})
	}
}

func TestGetInstanceTypesErrors(t *testing.T) {
	f := newFixture(t, joinerv1alpha1.LocalNodeClassSpec{}, nil)
	kube := f.kube
	bad := &joinerv1alpha1.LocalNodeClass{ObjectMeta: metav1.ObjectMeta{Name: uniqueName(t)},
		Spec: joinerv1alpha1.LocalNodeClassSpec{Zones: []string{"us-east-1a", "us-east-1z"}}}
	if err := kube.Create(context.Background(), bad); err != nil {
		t.Fatalf("create class: %v", err)
	}
	t.Cleanup(func() { _ = kube.Delete(context.Background(), bad) })
	for _, tc := range []struct {
		name         string
		ref          *karpv1.NodeClassReference
		wantNotReady bool
		wantMsg      string
	}{
		{name: "missing class", ref: &karpv1.NodeClassReference{Group: "joiner.dev", Kind: NodeClassKind, Name: "absent"},
			wantNotReady: true, wantMsg: `LocalNodeClass "absent" not found`},
		{name: "unknown zone", ref: &karpv1.NodeClassReference{Group: "joiner.dev", Kind: NodeClassKind, Name: bad.Name},
			wantNotReady: true, wantMsg: "spec.zones[1]: us-east-1z is not a zone of us-east-1"},
		{name: "another provider's class", ref: &karpv1.NodeClassReference{Group: "karpenter.k8s.aws", Kind: "EC2NodeClass", Name: "default"},
			wantMsg: "serves only LocalNodeClass"},
		{name: "no reference", wantMsg: "has no nodeClassRef"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			np := f.nodePool()
			np.Spec.Template.Spec.NodeClassRef = tc.ref
			_, err := f.p.GetInstanceTypes(context.Background(), np)
			if err == nil {
				t.Fatalf("GetInstanceTypes succeeded, want an error")
			}
			if got := cloudprovider.IsNodeClassNotReady(err); got != tc.wantNotReady {
				t.Errorf("IsNodeClassNotReady(%v) = %t, want %t", err, got, tc.wantNotReady)
			}
			if !strings.Contains(err.Error(), tc.wantMsg) {
				t.Errorf("error %q does not mention %q", err, tc.wantMsg)
			}
		})
	}
}

// cheapest is the test's oracle: the cheapest available offering of the named types that is
// compatible with reqs, among the instance types the provider serves.
func cheapest(t *testing.T, its []*cloudprovider.InstanceType, names []string, reqs requirements.Requirements) (string, *cloudprovider.Offering) {
	t.Helper()
	bestName, best := "", (*cloudprovider.Offering)(nil)
	for _, it := range its {
		if !slices.Contains(names, it.Name) {
			continue
		}
		for _, o := range it.Offerings {
			if o.Available && o.CompatibleWith(reqs) && (best == nil || o.Price < best.Price) {
				bestName, best = it.Name, o
			}
		}
	}
	if best == nil {
		t.Fatalf("no offering of %v is compatible with %s", names, reqs)
	}
	return bestName, best
}

func TestCreate(t *testing.T) {
	f := newFixture(t, joinerv1alpha1.LocalNodeClassSpec{NodeRegistrationDelay: longDelay, Labels: map[string]string{"team": "blue"}}, nil)
	ctx := context.Background()
	its, err := f.p.GetInstanceTypes(ctx, f.nodePool())
	if err != nil {
		t.Fatalf("GetInstanceTypes: %v", err)
	}
	general := []string{"m5.large", "c5.large", "m5.xlarge", "r5.large"}
	anyCapacity := req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "spot", "on-demand")
	cheapAny, cheapAnyOffering := cheapest(t, its, general, requirements.New(requirements.In(karpv1.CapacityTypeLabelKey, "spot", "on-demand")))
	cheapOD, cheapODOffering := cheapest(t, its, general, requirements.New(requirements.In(karpv1.CapacityTypeLabelKey, "on-demand")))
	if cheapAnyOffering.CapacityType() != "spot" || cheapAnyOffering.Price >= cheapODOffering.Price {
		t.Fatalf("the catalog no longer makes spot cheaper for %v (spot %v, on-demand %v); pick other types", general, cheapAnyOffering.Price, cheapODOffering.Price)
	}

	type want struct {
		instanceType, zone, capacityType string
		price                            float64
		arch                             string
		notType                          string // the launch must avoid this type
		notOffering                      string // nor this type/zone/capacity type
		insufficientCapacity             bool
		iceType                          string
		createErrReason                  string
		nodeClassNotReady                bool
	}
	for _, tc := range []struct {
		name     string
		setup    func(*Failures)
		claim    *karpv1.NodeClaim
		want     want
		thenWant *want // a second Create of the same claim
	}{
		{
			name:  "spot when allowed and cheaper",
			claim: f.nodeClaim("spot", nil, req(karpv1.LabelInstanceType, corev1.NodeSelectorOpIn, general...), anyCapacity),
			want:  want{instanceType: cheapAny, zone: cheapAnyOffering.Zone(), capacityType: "spot", price: cheapAnyOffering.Price},
		},
		{
			name:  "on-demand when spot is not allowed",
			claim: f.nodeClaim("od", nil, req(karpv1.LabelInstanceType, corev1.NodeSelectorOpIn, general...), req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "on-demand")),
			want:  want{instanceType: cheapOD, zone: cheapODOffering.Zone(), capacityType: "on-demand", price: cheapODOffering.Price},
		},
		{
			name: "zone requirement",
			claim: f.nodeClaim("zone", nil, req(karpv1.LabelInstanceType, corev1.NodeSelectorOpIn, "m5.large"), anyCapacity,
				req(karpv1.LabelTopologyZone, corev1.NodeSelectorOpIn, "us-east-1c")),
			want: want{instanceType: "m5.large", zone: "us-east-1c", capacityType: "spot"},
		},
		{
			name: "requests rule out types too small",
			claim: f.nodeClaim("big", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("3"), corev1.ResourceMemory: resource.MustParse("4Gi")},
				req(karpv1.LabelInstanceType, corev1.NodeSelectorOpIn, "t3.micro", "m5.large", "m5.xlarge"), anyCapacity),
			want: want{instanceType: "m5.xlarge"},
		},
		{
			name: "arm64",
			claim: f.nodeClaim("arm", nil, req(karpv1.LabelInstanceType, corev1.NodeSelectorOpIn, "m5.large", "m6g.large", "c6g.large", "c5.large"),
				req(karpv1.LabelArch, corev1.NodeSelectorOpIn, "arm64"), anyCapacity),
			want: want{arch: "arm64"},
		},
		{
			name: "an announced shortage of the cheapest offering is skipped",
			setup: func(fl *Failures) {
				fl.AddInsufficientCapacity(Shortage{InstanceType: cheapAny, Zone: cheapAnyOffering.Zone(), CapacityType: "spot"})
			},
			claim: f.nodeClaim("ice", nil, req(karpv1.LabelInstanceType, corev1.NodeSelectorOpIn, general...), anyCapacity),
			want:  want{notOffering: cheapAny + "/" + cheapAnyOffering.Zone() + "/spot"},
		},
		{
			name:  "an unannounced shortage of the cheapest type is skipped at launch",
			setup: func(fl *Failures) { fl.AddInsufficientCapacity(Shortage{InstanceType: cheapAny, Unannounced: true}) },
			claim: f.nodeClaim("ice-hidden", nil, req(karpv1.LabelInstanceType, corev1.NodeSelectorOpIn, general...), anyCapacity),
			want:  want{notType: cheapAny},
		},
		{
			name:  "insufficient capacity when every allowed offering is short",
			setup: func(fl *Failures) { fl.AddInsufficientCapacity(Shortage{InstanceType: "m5.large", Unannounced: true}) },
			claim: f.nodeClaim("ice-all", nil, req(karpv1.LabelInstanceType, corev1.NodeSelectorOpIn, "m5.large"), anyCapacity),
			want:  want{insufficientCapacity: true, iceType: "m5.large"},
		},
		{
			name:  "insufficient capacity when the allowed offerings are known to be short",
			setup: func(fl *Failures) { fl.AddInsufficientCapacity(Shortage{InstanceType: "m5.large"}) },
			claim: f.nodeClaim("ice-known", nil, req(karpv1.LabelInstanceType, corev1.NodeSelectorOpIn, "m5.large"), anyCapacity),
			want:  want{insufficientCapacity: true},
		},
		{
			name:  "insufficient capacity when nothing fits",
			claim: f.nodeClaim("huge", corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1000")}),
			want:  want{insufficientCapacity: true},
		},
		{
			name:     "injected launch failure, then success",
			setup:    func(fl *Failures) { fl.FailLaunches(1, nil) },
			claim:    f.nodeClaim("fail", nil, req(karpv1.LabelInstanceType, corev1.NodeSelectorOpIn, "m5.large"), anyCapacity),
			want:     want{createErrReason: ReasonLaunchFailed},
			thenWant: &want{instanceType: "m5.large"},
		},
		{
			name: "missing node class",
			claim: func() *karpv1.NodeClaim {
				nc := f.nodeClaim("orphan", nil)
				nc.Spec.NodeClassRef.Name = "absent"
				return nc
			}(),
			want: want{nodeClassNotReady: true},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f.p.Failures().Reset()
			if tc.setup != nil {
				tc.setup(f.p.Failures())
			}
			check := func(w want) {
				t.Helper()
				got, err := f.p.Create(ctx, tc.claim)
				switch {
				case w.insufficientCapacity:
					ice, ok := cloudprovider.AsInsufficientCapacity(err)
					if !ok {
						t.Fatalf("Create = %v, want an InsufficientCapacityError", err)
					}
					if ice.InstanceType != w.iceType {
						t.Errorf("the error names type %q, want %q", ice.InstanceType, w.iceType)
					}
					return
				case w.createErrReason != "":
					var ce *cloudprovider.CreateError
					if !errors.As(err, &ce) || ce.Reason != w.createErrReason {
						t.Fatalf("Create = %v, want a CreateError with reason %s", err, w.createErrReason)
					}
					return
				case w.nodeClassNotReady:
					if !cloudprovider.IsNodeClassNotReady(err) {
						t.Fatalf("Create = %v, want a NodeClassNotReadyError", err)
					}
					return
				}
				if err != nil {
					t.Fatalf("Create: %v", err)
				}
				checkLaunched(t, f, its, tc.claim, got, w.instanceType, w.zone, w.capacityType, w.arch, w.price)
				l := got.Labels
				if w.notType != "" && l[karpv1.LabelInstanceType] == w.notType {
					t.Errorf("launched %s, which is short of capacity", w.notType)
				}
				if w.notOffering != "" && l[karpv1.LabelInstanceType]+"/"+l[karpv1.LabelTopologyZone]+"/"+l[karpv1.CapacityTypeLabelKey] == w.notOffering {
					t.Errorf("launched %s, which is short of capacity", w.notOffering)
				}
			}
			check(tc.want)
			if tc.thenWant != nil {
				check(*tc.thenWant)
			}
		})
	}
}

// checkLaunched checks a NodeClaim returned by Create against the claim passed in and, when
// set, the expected type, zone, capacity type, arch and price.
func checkLaunched(t *testing.T, f *fixture, its []*cloudprovider.InstanceType, in, got *karpv1.NodeClaim, instanceType, zone, capacityType, arch string, price float64) {
	t.Helper()
	l := got.Labels
	for key, w := range map[string]string{
		karpv1.LabelInstanceType: instanceType, karpv1.LabelTopologyZone: zone, karpv1.CapacityTypeLabelKey: capacityType, karpv1.LabelArch: arch,
	} {
		if w != "" && l[key] != w {
			t.Errorf("label %s = %q, want %q", key, l[key], w)
		}
	}
	for _, key := range []string{karpv1.LabelInstanceType, karpv1.LabelTopologyZone, karpv1.LabelTopologyRegion, karpv1.CapacityTypeLabelKey,
		karpv1.LabelArch, karpv1.LabelOS, catalog.LabelInstanceFamily} {
		if l[key] == "" {
			t.Errorf("label %s missing from %v", key, l)
		}
	}
	if l[karpv1.NodePoolLabelKey] != in.Labels[karpv1.NodePoolLabelKey] || l["team"] != "blue" {
		t.Errorf("the NodeClaim's and the class's labels were not kept: %v", l)
	}
	iid, err := ParseProviderID(got.Status.ProviderID)
	if err != nil {
		t.Fatalf("provider id: %v", err)
	}
	if iid.Region != l[karpv1.LabelTopologyRegion] || iid.Zone != l[karpv1.LabelTopologyZone] {
		t.Errorf("provider id %s does not match region %s and zone %s", got.Status.ProviderID, l[karpv1.LabelTopologyRegion], l[karpv1.LabelTopologyZone])
	}
	i := slices.IndexFunc(its, func(it *cloudprovider.InstanceType) bool { return it.Name == l[karpv1.LabelInstanceType] })
	if i < 0 {
		t.Fatalf("launched type %s is not served", l[karpv1.LabelInstanceType])
	}
	it := its[i]
	for name, q := range it.Allocatable() {
		if g := got.Status.Allocatable[name]; g.Cmp(q) != 0 {
			t.Errorf("allocatable %s = %s, want %s", name, g.String(), q.String())
		}
	}
	for name, q := range it.Capacity {
		if g := got.Status.Capacity[name]; g.Cmp(q) != 0 {
			t.Errorf("capacity %s = %s, want %s", name, g.String(), q.String())
		}
	}
	if !it.Fits(in.Spec.Resources.Requests) {
		t.Errorf("%s does not fit the requests %v", it.Name, in.Spec.Resources.Requests)
	}
	if price != 0 {
		o := it.Offerings[slices.IndexFunc(it.Offerings, func(o *cloudprovider.Offering) bool {
			return o.Zone() == l[karpv1.LabelTopologyZone] && o.CapacityType() == l[karpv1.CapacityTypeLabelKey]
		})]
		if math.Abs(o.Price-price) > 1e-12 {
			t.Errorf("launched an offering at %v, want the cheapest at %v", o.Price, price)
		}
	}
	if in.Status.ProviderID != "" || in.Labels[karpv1.LabelInstanceType] != "" {
		t.Errorf("Create modified the NodeClaim passed in")
	}
	if _, err := f.p.Get(context.Background(), got.Status.ProviderID); err != nil {
		t.Errorf("Get(%s) after Create: %v", got.Status.ProviderID, err)
	}
}

// TestNodeRegistration follows one instance through its life: no Node before the registration
// delay, then a kwok Node with the launch's labels, taints and resources that kwok makes Ready,
// and termination by Delete.
func TestNodeRegistration(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	f := newFixture(t, joinerv1alpha1.LocalNodeClassSpec{
		NodeRegistrationDelay: &metav1.Duration{Duration: 30 * time.Second},
		Labels:                map[string]string{"team": "blue"},
	}, clk)
	ctx := context.Background()
	claim := f.nodeClaim("registers", nil, req(karpv1.LabelInstanceType, corev1.NodeSelectorOpIn, "m5.large"),
		req(karpv1.CapacityTypeLabelKey, corev1.NodeSelectorOpIn, "on-demand"))
	claim.Labels["app"] = "web"
	claim.Spec.Taints = []karpv1.Taint{{Key: "dedicated", Value: "web", Effect: corev1.TaintEffectNoSchedule}}
	claim.Spec.StartupTaints = []karpv1.Taint{{Key: "example.com/agent-not-ready", Effect: corev1.TaintEffectNoSchedule}}
	launched, err := f.p.Create(ctx, claim)
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	iid, _ := ParseProviderID(launched.Status.ProviderID)

	nodeExists := func() bool {
		err := f.kube.Get(ctx, types.NamespacedName{Name: iid.ID}, &corev1.Node{})
		if err != nil && !apierrors.IsNotFound(err) {
			t.Fatalf("get node: %v", err)
		}
		return err == nil
	}
	if !clk.HasWaiters() {
		t.Fatalf("no registration timer is waiting")
	}
	clk.Step(29 * time.Second)
	if nodeExists() {
		t.Fatalf("the Node exists before the registration delay passed")
	}
	clk.Step(time.Second)
	node := &corev1.Node{}
	eventually(t, 10*time.Second, func() (bool, string) {
		err := f.kube.Get(ctx, types.NamespacedName{Name: iid.ID}, node)
		return err == nil, "node not created"
	})

	if node.Annotations[testbed.KwokNodeAnnotation] != testbed.KwokNodeAnnotationValue {
		t.Errorf("node annotations %v do not hand it to kwok", node.Annotations)
	}
	if node.Spec.ProviderID != launched.Status.ProviderID {
		t.Errorf("node provider id %q, want %q", node.Spec.ProviderID, launched.Status.ProviderID)
	}
	for key, want := range map[string]string{
		karpv1.LabelInstanceType:    "m5.large",
		karpv1.LabelTopologyZone:    iid.Zone,
		karpv1.LabelTopologyRegion:  "us-east-1",
		karpv1.LabelArch:            "amd64",
		karpv1.LabelOS:              "linux",
		karpv1.CapacityTypeLabelKey: "on-demand",
		karpv1.NodePoolLabelKey:     "default",
		karpv1.LabelHostname:        iid.ID,
		"app":                       "web",
		"team":                      "blue",
	} {
		if node.Labels[key] != want {
			t.Errorf("node label %s = %q, want %q", key, node.Labels[key], want)
		}
	}
	for _, want := range []corev1.Taint{claim.Spec.Taints[0].ToCore(), claim.Spec.StartupTaints[0].ToCore(), karpv1.UnregisteredNoExecuteTaint()} {
		if !slices.ContainsFunc(node.Spec.Taints, func(t corev1.Taint) bool { return t.MatchTaint(&want) }) {
			t.Errorf("node taints %v lack %v", node.Spec.Taints, want)
		}
	}

	eventually(t, 20*time.Second, func() (bool, string) {
		if err := f.kube.Get(ctx, types.NamespacedName{Name: iid.ID}, node); err != nil {
			return false, err.Error()
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return true, ""
			}
		}
		return false, "kwok has not made the node Ready"
	})
	for what, pair := range map[string][2]corev1.ResourceList{
		"capacity":    {node.Status.Capacity, launched.Status.Capacity},
		"allocatable": {node.Status.Allocatable, launched.Status.Allocatable},
	} {
		for name, q := range pair[1] {
			if g := pair[0][name]; g.Cmp(q) != 0 {
				t.Errorf("ready node %s %s = %s, want %s", what, name, g.String(), q.String())
			}
		}
	}

	got, err := f.p.Get(ctx, launched.Status.ProviderID)
	if err != nil || got.Labels[karpv1.LabelInstanceType] != "m5.large" {
		t.Errorf("Get = %v, %v; want the launched NodeClaim", got, err)
	}

	if err := f.p.Delete(ctx, launched); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	eventually(t, 10*time.Second, func() (bool, string) { return !nodeExists(), "node still exists after Delete" })
	if _, err := f.p.Get(ctx, launched.Status.ProviderID); !cloudprovider.IsNodeClaimNotFound(err) {
		t.Errorf("Get after Delete = %v, want NodeClaimNotFound", err)
	}
	if err := f.p.Delete(ctx, launched); !cloudprovider.IsNodeClaimNotFound(err) {
		t.Errorf("second Delete = %v, want NodeClaimNotFound", err)
	}
	list, err := f.p.List(ctx)
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	if slices.ContainsFunc(list, func(nc *karpv1.NodeClaim) bool { return nc.Status.ProviderID == launched.Status.ProviderID }) {
		t.Errorf("List still has the deleted instance")
	}
}

// TestNeverRegister checks that an instance of a type set never to register exists for Get and
// List but never gets a Node, and that Delete still terminates it.
func TestNeverRegister(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	f := newFixture(t, joinerv1alpha1.LocalNodeClassSpec{NodeRegistrationDelay: &metav1.Duration{Duration: time.Second}}, clk)
	ctx := context.Background()
	f.p.Failures().NeverRegister("m5.large")
	launched, err := f.p.Create(ctx, f.nodeClaim("ghost", nil, req(karpv1.LabelInstanceType, corev1.NodeSelectorOpIn, "m5.large")))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if clk.HasWaiters() || registrationGoroutines() != 0 {
		t.Fatalf("an instance that never registers is waiting to register")
	}
	clk.Step(time.Hour)
	iid, _ := ParseProviderID(launched.Status.ProviderID)
	if err := f.kube.Get(ctx, types.NamespacedName{Name: iid.ID}, &corev1.Node{}); !apierrors.IsNotFound(err) {
		t.Errorf("get node = %v, want NotFound", err)
	}
	if _, err := f.p.Get(ctx, launched.Status.ProviderID); err != nil {
		t.Errorf("Get: %v", err)
	}
	list, err := f.p.List(ctx)
	if err != nil || !slices.ContainsFunc(list, func(nc *karpv1.NodeClaim) bool { return nc.Status.ProviderID == launched.Status.ProviderID }) {
		t.Errorf("List = %d claims, %v; want the unregistered instance among them", len(list), err)
	}
	if err := f.p.Delete(ctx, launched); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if _, err := f.p.Get(ctx, launched.Status.ProviderID); !cloudprovider.IsNodeClaimNotFound(err) {
		t.Errorf("Get after Delete = %v, want NodeClaimNotFound", err)
	}
}

// TestDeleteBeforeRegistration checks that terminating an instance before its delay stops its
// registration: no goroutine or timer stays behind and no Node appears.
func TestDeleteBeforeRegistration(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	f := newFixture(t, joinerv1alpha1.LocalNodeClassSpec{NodeRegistrationDelay: &metav1.Duration{Duration: 10 * time.Second}}, clk)
	ctx := context.Background()
	launched, err := f.p.Create(ctx, f.nodeClaim("early", nil, req(karpv1.LabelInstanceType, corev1.NodeSelectorOpIn, "c5.large")))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	eventually(t, 5*time.Second, func() (bool, string) {
		n := registrationGoroutines()
		return n == 1, fmt.Sprintf("%d registrations waiting, want 1", n)
	})
	if err := f.p.Delete(ctx, launched); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	eventually(t, 5*time.Second, func() (bool, string) {
		return registrationGoroutines() == 0 && !clk.HasWaiters(), "the registration is still waiting"
	})
	clk.Step(time.Minute)
	iid, _ := ParseProviderID(launched.Status.ProviderID)
	if err := f.kube.Get(ctx, types.NamespacedName{Name: iid.ID}, &corev1.Node{}); !apierrors.IsNotFound(err) {
		t.Errorf("get node = %v, want NotFound", err)
	}
}

// TestListAndGetAcrossRestart checks that a second provider (Joiner restarted) finds an instance
// through its Node, can terminate it, and that the first then notices the Node is gone.
func TestListAndGetAcrossRestart(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	f := newFixture(t, joinerv1alpha1.LocalNodeClassSpec{NodeRegistrationDelay: &metav1.Duration{}}, clk)
	ctx := context.Background()
	f.p.Failures().NeverRegister("t3.small")
	running, err := f.p.Create(ctx, f.nodeClaim("running", nil, req(karpv1.LabelInstanceType, corev1.NodeSelectorOpIn, "m5.large")))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	ghost, err := f.p.Create(ctx, f.nodeClaim("ghost", nil, req(karpv1.LabelInstanceType, corev1.NodeSelectorOpIn, "t3.small")))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	iid, _ := ParseProviderID(running.Status.ProviderID)
	eventually(t, 10*time.Second, func() (bool, string) {
		return f.kube.Get(ctx, types.NamespacedName{Name: iid.ID}, &corev1.Node{}) == nil, "node not created"
	})
	providerIDs := func(p *Provider) []string {
		t.Helper()
		list, err := p.List(ctx)
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		var out []string
		for _, nc := range list {
			out = append(out, nc.Status.ProviderID)
		}
		return out
	}
	if got := providerIDs(f.p); !slices.Contains(got, running.Status.ProviderID) || !slices.Contains(got, ghost.Status.ProviderID) {
		t.Errorf("List = %v, want both instances", got)
	}

	restarted, err := New(ctx, f.kube, Options{Log: f.p.log})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	got := providerIDs(restarted)
	if !slices.Contains(got, running.Status.ProviderID) || slices.Contains(got, ghost.Status.ProviderID) {
		t.Errorf("after a restart List = %v, want the registered instance only", got)
	}
	found, err := restarted.Get(ctx, running.Status.ProviderID)
	if err != nil {
		t.Fatalf("Get after restart: %v", err)
	}
	if found.Labels[karpv1.LabelInstanceType] != "m5.large" || found.Status.Allocatable.Cpu().Cmp(*running.Status.Allocatable.Cpu()) != 0 {
		t.Errorf("Get after restart = labels %v allocatable %v, want the launched instance's", found.Labels, found.Status.Allocatable)
	}
	if _, err := restarted.Get(ctx, ghost.Status.ProviderID); !cloudprovider.IsNodeClaimNotFound(err) {
		t.Errorf("Get of an instance without a Node after restart = %v, want NodeClaimNotFound", err)
	}
	if err := restarted.Delete(ctx, found); err != nil {
		t.Fatalf("Delete after restart: %v", err)
	}
	eventually(t, 10*time.Second, func() (bool, string) {
		return apierrors.IsNotFound(f.kube.Get(ctx, types.NamespacedName{Name: iid.ID}, &corev1.Node{})), "node still exists"
	})
	// The first provider gives a vanished Node time to show up in a lagging cache, then counts
	// the instance as terminated.
	if _, err := f.p.Get(ctx, running.Status.ProviderID); err != nil {
		t.Errorf("Get right after the Node vanished = %v, want the instance (grace period)", err)
	}
	clk.Step(2 * nodeGoneGrace)
	if _, err := f.p.Get(ctx, running.Status.ProviderID); !cloudprovider.IsNodeClaimNotFound(err) {
		t.Errorf("Get long after the Node vanished = %v, want NodeClaimNotFound", err)
	}
	if got := providerIDs(f.p); slices.Contains(got, running.Status.ProviderID) || !slices.Contains(got, ghost.Status.ProviderID) {
		t.Errorf("List = %v, want the unregistered instance only", got)
	}
}

func TestIsDrifted(t *testing.T) {
	f := newFixture(t, joinerv1alpha1.LocalNodeClassSpec{Zones: []string{"us-east-1a", "us-east-1b"}}, nil)
	ctx := context.Background()
	claim := f.nodeClaim("drift", nil)
	claim.Status.ProviderID = InstanceID{Region: "us-east-1", Zone: "us-east-1a", ID: "i-0123456789abcdef0"}.ProviderID()
	claim.Labels[karpv1.LabelTopologyZone] = "us-east-1a"
	for _, tc := range []struct {
		name string
		spec joinerv1alpha1.LocalNodeClassSpec
		want cloudprovider.DriftReason
	}{
		{name: "zone still offered", spec: joinerv1alpha1.LocalNodeClassSpec{Zones: []string{"us-east-1a", "us-east-1b"}}},
		{name: "every zone of the region", spec: joinerv1alpha1.LocalNodeClassSpec{}},
		{name: "zone removed", spec: joinerv1alpha1.LocalNodeClassSpec{Zones: []string{"us-east-1b"}}, want: DriftReasonZone},
		{name: "region changed", spec: joinerv1alpha1.LocalNodeClassSpec{Region: "us-west-2"}, want: DriftReasonZone},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := &joinerv1alpha1.LocalNodeClass{}
			if err := f.kube.Get(ctx, types.NamespacedName{Name: f.class}, nc); err != nil {
				t.Fatalf("get class: %v", err)
			}
			nc.Spec = tc.spec
			if err := f.kube.Update(ctx, nc); err != nil {
				t.Fatalf("update class: %v", err)
			}
			got, err := f.p.IsDrifted(ctx, claim)
			if err != nil || got != tc.want {
				t.Errorf("IsDrifted = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
	orphan := claim.DeepCopy()
	orphan.Spec.NodeClassRef.Name = "absent"
	if _, err := f.p.IsDrifted(ctx, orphan); !cloudprovider.IsNodeClassNotReady(err) {
		t.Errorf("IsDrifted with a missing class = %v, want NodeClassNotReady", err)
	}
}

// TestIsDriftedOnNodeClassChange launches an instance, which stamps the NodeClaim with its class's
// hash, and changes the class: a change of its labels, which every Node of the class carries,
// drifts the instance; a change of the registration delay, which shapes no node, does not.
func TestIsDriftedOnNodeClassChange(t *testing.T) {
	initial := joinerv1alpha1.LocalNodeClassSpec{Zones: []string{"us-east-1a"}, NodeRegistrationDelay: longDelay, Labels: map[string]string{"tier": "a"}}
	f := newFixture(t, initial, nil)
	ctx := context.Background()
	launched, err := f.p.Create(ctx, f.nodeClaim("drift", nil, req(karpv1.LabelInstanceType, corev1.NodeSelectorOpIn, "m5.large")))
	if err != nil {
		t.Fatalf("Create: %v", err)
	}
	if launched.Annotations[NodeClassHashAnnotationKey] == "" || launched.Annotations[NodeClassHashVersionAnnotationKey] != NodeClassHashVersion {
		t.Fatalf("launched nodeclaim annotations %v, want the class hash stamped", launched.Annotations)
	}
	unstamped := launched.DeepCopy()
	delete(unstamped.Annotations, NodeClassHashAnnotationKey)
	otherVersion := launched.DeepCopy()
	otherVersion.Annotations[NodeClassHashVersionAnnotationKey] = "v0"
	labels := func(kv ...string) map[string]string {
		out := map[string]string{}
		for i := 0; i+1 < len(kv); i += 2 {
			out[kv[i]] = kv[i+1]
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		change func(spec *joinerv1alpha1.LocalNodeClassSpec)
		claim  *karpv1.NodeClaim
		want   cloudprovider.DriftReason
	}{
		{name: "unchanged", change: func(*joinerv1alpha1.LocalNodeClassSpec) {}, claim: launched},
		{name: "registration delay changed", change: func(s *joinerv1alpha1.LocalNodeClassSpec) {
			s.NodeRegistrationDelay = &metav1.Duration{Duration: 2 * time.Hour}
		}, claim: launched},
		{name: "zone added", change: func(s *joinerv1alpha1.LocalNodeClassSpec) { s.Zones = append(s.Zones, "us-east-1b") }, claim: launched},
		{name: "label value changed", change: func(s *joinerv1alpha1.LocalNodeClassSpec) { s.Labels = labels("tier", "b") },
			claim: launched, want: DriftReasonNodeClass},
		{name: "label added", change: func(s *joinerv1alpha1.LocalNodeClassSpec) { s.Labels = labels("tier", "a", "extra", "x") },
			claim: launched, want: DriftReasonNodeClass},
		{name: "labels removed", change: func(s *joinerv1alpha1.LocalNodeClassSpec) { s.Labels = nil }, claim: launched, want: DriftReasonNodeClass},
		{name: "zone removed comes first", change: func(s *joinerv1alpha1.LocalNodeClassSpec) {
			s.Zones = []string{"us-east-1b"}
			s.Labels = labels("tier", "b")
		}, claim: launched, want: DriftReasonZone},
		{name: "labels changed, nodeclaim without a stamp", change: func(s *joinerv1alpha1.LocalNodeClassSpec) { s.Labels = labels("tier", "b") },
			claim: unstamped},
		{name: "labels changed, stamp of another version", change: func(s *joinerv1alpha1.LocalNodeClassSpec) { s.Labels = labels("tier", "b") },
			claim: otherVersion},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nc := &joinerv1alpha1.LocalNodeClass{}
			if err := f.kube.Get(ctx, types.NamespacedName{Name: f.class}, nc); err != nil {
				t.Fatalf("get class: %v", err)
			}
			nc.Spec = *initial.DeepCopy()
			tc.change(&nc.Spec)
			if err := f.kube.Update(ctx, nc); err != nil {
				t.Fatalf("update class: %v", err)
			}
			got, err := f.p.IsDrifted(ctx, tc.claim)
			if err != nil || got != tc.want {
				t.Errorf("IsDrifted = %q, %v; want %q", got, err, tc.want)
			}
		})
	}
}

// TestStopsWithContext checks that pending registrations end when the provider's context does,
// leaving no goroutine behind, and that Create then fails.
func TestStopsWithContext(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	f := newFixture(t, joinerv1alpha1.LocalNodeClassSpec{NodeRegistrationDelay: longDelay}, clk)
	ctx := context.Background()
	for i := range 5 {
		if _, err := f.p.Create(ctx, f.nodeClaim("pending-"+string(rune('a'+i)), nil, req(karpv1.LabelInstanceType, corev1.NodeSelectorOpIn, "m5.large"))); err != nil {
			t.Fatalf("Create: %v", err)
		}
	}
	eventually(t, 5*time.Second, func() (bool, string) {
		n := registrationGoroutines()
		return n == 5, fmt.Sprintf("%d registrations waiting, want 5", n)
	})
	f.cancel()
	done := make(chan struct{})
	go func() { f.p.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("Wait did not return within 10s of the context ending")
	}
	if n := registrationGoroutines(); n != 0 {
		t.Errorf("%d registration goroutines left after the context ended", n)
	}
	if _, err := f.p.Create(ctx, f.nodeClaim("late", nil)); err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Errorf("Create after the context ended = %v, want an error saying the provider stopped", err)
	}
}
