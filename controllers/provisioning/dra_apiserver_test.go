package provisioning

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/go-logr/logr/testr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	joinerv1alpha1 "github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/api/scheme"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/controllers/provisioning/dra"
	"github.com/joiner-dev/joiner/providers/local"
	"github.com/joiner-dev/joiner/testbed"
	"github.com/joiner-dev/joiner/testsupport/controllertest"
	"github.com/joiner-dev/joiner/testsupport/eventstest"
)

// draBed is the API server of TestDRAOnAPIServer with the objects every case shares: a
// LocalNodeClass and NodePool over the local provider's catalog, the NVIDIA GPU DeviceClass and an
// FPGA class Joiner does not know, and one ResourceClaimTemplate for each.
type draBed struct {
	c        client.Client
	provider *local.Provider
	types    map[string]*cloudprovider.InstanceType
}

func startDRABed(t *testing.T) *draBed {
	t.Helper()
	root, err := controllertest.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	tb := testbed.StartForTest(t, testbed.Options{CRDDirs: []string{filepath.Join(root, "config", "crd", "bases")}})
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.New(tb.Config, client.Options{Scheme: s})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	provider, err := local.New(ctx, c, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	np := &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: karpv1.NodePoolSpec{Template: karpv1.NodeClaimTemplate{
		Spec: karpv1.NodeClaimTemplateSpec{
			NodeClassRef: &karpv1.NodeClassReference{Group: joinerv1alpha1.GroupVersion.Group, Kind: local.NodeClassKind, Name: "default"},
			Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: karpv1.CapacityTypeLabelKey, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.CapacityTypeOnDemand}}},
		}}}}
	gpuRequest := func(class string) resourcev1.ResourceClaimTemplateSpec {
		return resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{
			{Name: "dev", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1}}}}}}
	}
	objects := []client.Object{
		&joinerv1alpha1.LocalNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "default"}, Spec: joinerv1alpha1.LocalNodeClassSpec{Region: "us-east-1"}},
		np,
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ml"}},
		&resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: dra.ClassNVIDIAGPU}},
		&resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: "fpga.example.com"}},
		&resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "one-gpu"}, Spec: gpuRequest(dra.ClassNVIDIAGPU)},
		&resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: "one-fpga"}, Spec: gpuRequest("fpga.example.com")},
	}
	for _, o := range objects {
		if err := c.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
	its, err := provider.GetInstanceTypes(ctx, np)
	if err != nil {
		t.Fatal(err)
	}
	b := &draBed{c: c, provider: provider, types: map[string]*cloudprovider.InstanceType{}}
	for _, it := range its {
		b.types[it.Name] = it
	}
	return b
}

// fromTemplate is a pod's claim "dev" from the ResourceClaimTemplate.
func fromTemplate(template string) corev1.PodResourceClaim {
	return corev1.PodResourceClaim{Name: "dev", ResourceClaimTemplateName: ptr.To(template)}
}

// pendingPod creates a pod of namespace ml that requests 1 cpu and makes the claim, and marks it
// Unschedulable as kube-scheduler would.
func (b *draBed) pendingPod(t *testing.T, name string, claim corev1.PodResourceClaim) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name}, Spec: corev1.PodSpec{
		Containers: []corev1.Container{{Name: "main", Image: "registry.k8s.io/pause:3.10",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}}}
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{claim}
	pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: claim.Name}}
	if err := b.c.Create(ctx, pod); err != nil {
		t.Fatalf("create pod %s: %v", name, err)
	}
	pod.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: corev1.PodReasonUnschedulable,
		LastTransitionTime: metav1.Now()}}
	if err := b.c.Status().Update(ctx, pod); err != nil {
		t.Fatalf("mark pod %s unschedulable: %v", name, err)
	}
	t.Cleanup(func() { _ = b.c.Delete(context.Background(), pod, client.GracePeriodSeconds(0)) })
	return pod
}

// allocatedClaim creates a ResourceClaim for one NVIDIA GPU and records it as allocated to a
// device of the node, as kube-scheduler would.
func (b *draBed) allocatedClaim(t *testing.T, name, node string) {
	t.Helper()
	ctx := context.Background()
	claim := &resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: "ml", Name: name},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{
			{Name: "dev", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: dra.ClassNVIDIAGPU, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 1}}}}}}
	if err := b.c.Create(ctx, claim); err != nil {
		t.Fatalf("create ResourceClaim %s: %v", name, err)
	}
	t.Cleanup(func() { _ = b.c.Delete(context.Background(), claim) })
	claim.Status.Allocation = &resourcev1.AllocationResult{
		Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{
			{Request: "dev", Driver: dra.ClassNVIDIAGPU, Pool: node, Device: "gpu-0"}}},
		NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}}}}},
	}
	if err := b.c.Status().Update(ctx, claim); err != nil {
		t.Fatalf("allocate ResourceClaim %s: %v", name, err)
	}
}

// round runs one provisioning round and returns the NodeClaims it created (deleted again when the
// test ends) and the Events it recorded.
func (b *draBed) round(t *testing.T, opts Options) ([]karpv1.NodeClaim, []string) {
	t.Helper()
	ctx := context.Background()
	recorder := events.NewFakeRecorder(100)
	p, err := New(b.c, b.provider, recorder, clocktesting.NewFakeClock(testNow), testr.New(t), prometheus.NewRegistry(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Provision(ctx); err != nil {
		t.Fatalf("Provision: %v", err)
	}
	list := &karpv1.NodeClaimList{}
	if err := b.c.List(ctx, list); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for i := range list.Items {
			_ = b.c.Delete(context.Background(), &list.Items[i])
		}
	})
	return list.Items, eventstest.Drain(recorder)
}

// instanceTypes are the instance types a NodeClaim may launch as.
func instanceTypes(nc *karpv1.NodeClaim) []string {
	for _, r := range nc.Spec.Requirements {
		if r.Key == corev1.LabelInstanceTypeStable && r.Operator == corev1.NodeSelectorOpIn {
			return r.Values
		}
	}
	return nil
}

// gpusOf is how many NVIDIA GPUs the instance type carries.
func (b *draBed) gpusOf(t *testing.T, name string) int64 {
	t.Helper()
	it := b.types[name]
	if it == nil {
		t.Fatalf("instance type %s is not in the local catalog", name)
	}
	q := it.Capacity[dra.Classes()[dra.ClassNVIDIAGPU]]
	return q.Value()
}

// TestDRAOnAPIServer runs provisioning rounds against a real API server that serves
// resource.k8s.io/v1, over the local provider's catalog: with DRA-aware packing a pod claiming an
// NVIDIA GPU through a ResourceClaimTemplate gets a NodeClaim whose every instance type has a GPU
// (and whose requests do not ask the Node to advertise one), a pod claiming a device of a class
// Joiner does not know gets an Event and no NodeClaim; with Karpenter's default the claim is
// ignored and the cheapest instance types, without GPUs, are planned.
func TestDRAOnAPIServer(t *testing.T) {
	b := startDRABed(t)

	t.Run("GPU claim gets a GPU instance type, unknown class gets an Event and no NodeClaim", func(t *testing.T) {
		b.pendingPod(t, "trainer", fromTemplate("one-gpu"))
		b.pendingPod(t, "fpga", fromTemplate("one-fpga"))
		claims, recorded := b.round(t, Options{ModelDRARequests: true})
		if len(claims) != 1 {
			t.Fatalf("got %d NodeClaims, want 1 (for the GPU pod only); events: %q", len(claims), recorded)
		}
		names := instanceTypes(&claims[0])
		if len(names) == 0 {
			t.Fatalf("NodeClaim %s has no instance-type requirement: %v", claims[0].Name, claims[0].Spec.Requirements)
		}
		for _, name := range names {
			if n := b.gpusOf(t, name); n < 1 {
				t.Errorf("NodeClaim may launch as %s, which has %d NVIDIA GPUs", name, n)
			}
		}
		if _, ok := claims[0].Spec.Resources.Requests["nvidia.com/gpu"]; ok {
			t.Errorf("NodeClaim requests %v: the claim's GPU must not be asked of the Node as an extended resource", claims[0].Spec.Resources.Requests)
		}
		wantEvents := []string{
			"Normal Nominated pod should schedule on NodeClaim " + claims[0].Name,
			`Warning FailedProvisioning no capacity is launched for this pod: resource claim "dev" (ResourceClaimTemplate one-fpga): request "dev": DeviceClass "fpga.example.com" stands for no extended resource of the instance types`,
		}
		for _, want := range wantEvents {
			if !slices.ContainsFunc(recorded, func(e string) bool { return strings.HasPrefix(e, want) }) {
				t.Errorf("no Event starting with %q among %q", want, recorded)
			}
		}
		if n := len(recorded); n != 2 {
			t.Errorf("got %d Events, want 2 (the GPU pod's nomination, the FPGA pod's refusal): %q", n, recorded)
		}
	})

	t.Run("allocated claim is left to kube-scheduler: Event, no NodeClaim", func(t *testing.T) {
		b.allocatedClaim(t, "pinned", "gpu-node-1")
		b.pendingPod(t, "pinned", corev1.PodResourceClaim{Name: "dev", ResourceClaimName: ptr.To("pinned")})
		claims, recorded := b.round(t, Options{ModelDRARequests: true})
		if len(claims) != 0 {
			t.Errorf("got %d NodeClaims, want none", len(claims))
		}
		want := `Warning FailedProvisioning no capacity is launched for this pod: resource claim "dev" (ResourceClaim pinned): the claim is already allocated, to devices on node gpu-node-1; kube-scheduler places the pod there`
		if !slices.ContainsFunc(recorded, func(e string) bool { return strings.HasPrefix(e, want) }) {
			t.Errorf("no Event starting with %q among %q", want, recorded)
		}
	})

	t.Run("IGNORE_DRA_REQUESTS=true (the default) ignores the claim", func(t *testing.T) {
		b.pendingPod(t, "ignored", fromTemplate("one-gpu"))
		claims, recorded := b.round(t, Options{})
		if len(claims) != 1 {
			t.Fatalf("got %d NodeClaims, want 1; events: %q", len(claims), recorded)
		}
		withoutGPU := slices.ContainsFunc(instanceTypes(&claims[0]), func(name string) bool { return b.gpusOf(t, name) == 0 })
		if !withoutGPU {
			t.Errorf("NodeClaim may launch as %v only, all with GPUs: the ignored claim must not narrow the instance types", instanceTypes(&claims[0]))
		}
	})
}
