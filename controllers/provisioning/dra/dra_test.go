package dra

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
)

const ns = "ml"

func class(name string, extended string) resourcev1.DeviceClass {
	dc := resourcev1.DeviceClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if extended != "" {
		dc.Spec.ExtendedResourceName = ptr.To(extended)
	}
	return dc
}

// exactly is a request for count devices of class in mode.
func exactly(name, class string, mode resourcev1.DeviceAllocationMode, count int64) resourcev1.DeviceRequest {
	return resourcev1.DeviceRequest{Name: name, Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class, AllocationMode: mode, Count: count}}
}

func claimSpec(reqs ...resourcev1.DeviceRequest) resourcev1.ResourceClaimSpec {
	return resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: reqs}}
}

func claim(name string, spec resourcev1.ResourceClaimSpec) resourcev1.ResourceClaim {
	return resourcev1.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: spec}
}

func template(name string, spec resourcev1.ResourceClaimSpec) resourcev1.ResourceClaimTemplate {
	return resourcev1.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: spec}}
}

// pod is a pod of namespace ns with the claims.
func pod(uid string, claims ...corev1.PodResourceClaim) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "p-" + uid, UID: types.UID("uid-" + uid)},
		Spec: corev1.PodSpec{ResourceClaims: claims}}
}

func named(entry, claimName string) corev1.PodResourceClaim {
	return corev1.PodResourceClaim{Name: entry, ResourceClaimName: ptr.To(claimName)}
}

func fromTemplate(entry, tmpl string) corev1.PodResourceClaim {
	return corev1.PodResourceClaim{Name: entry, ResourceClaimTemplateName: ptr.To(tmpl)}
}

func gpus(n int64) corev1.ResourceList {
	return corev1.ResourceList{"nvidia.com/gpu": *resource.NewQuantity(n, resource.DecimalSI)}
}

// objects is a cluster with the NVIDIA and Neuron classes, an unknown class, a class that names
// its extended resource, and the claims and templates the cases use.
func objects() *Objects {
	withSelector := claimSpec(exactly("gpu", ClassNVIDIAGPU, "", 1))
	withSelector.Devices.Requests[0].Exactly.Selectors = []resourcev1.DeviceSelector{{CEL: &resourcev1.CELDeviceSelector{Expression: `device.attributes["gpu.nvidia.com"].productName == "H100"`}}}
	withConstraint := claimSpec(exactly("a", ClassNVIDIAGPU, "", 1), exactly("b", ClassNVIDIAGPU, "", 1))
	withConstraint.Devices.Constraints = []resourcev1.DeviceConstraint{{MatchAttribute: ptr.To(resourcev1.FullyQualifiedName("gpu.nvidia.com/pcieRoot"))}}
	allocated := claim("allocated", claimSpec(exactly("gpu", ClassNVIDIAGPU, "", 1)))
	allocated.Status.Allocation = &resourcev1.AllocationResult{NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
		MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"gpu-node-1"}}}}}}}
	firstAvailable := claimSpec(resourcev1.DeviceRequest{Name: "any", FirstAvailable: []resourcev1.DeviceSubRequest{
		{Name: "fpga", DeviceClassName: "fpga.example.com"},
		{Name: "gpu", DeviceClassName: ClassNVIDIAGPU, AllocationMode: resourcev1.DeviceAllocationModeExactCount, Count: 2},
	}})
	o := NewObjects(
		[]resourcev1.ResourceClaim{
			claim("two-gpus", claimSpec(exactly("gpu", ClassNVIDIAGPU, resourcev1.DeviceAllocationModeExactCount, 2))),
			claim("shared", claimSpec(exactly("gpu", ClassNVIDIAGPU, "", 1))),
			allocated,
			claim("selector", withSelector),
			claim("constraint", withConstraint),
			claim("generated-1", claimSpec(exactly("gpu", ClassNVIDIAGPU, "", 3))),
		},
		[]resourcev1.ResourceClaimTemplate{
			template("one-gpu", claimSpec(exactly("gpu", ClassNVIDIAGPU, "", 0))),
			template("all-gpus", claimSpec(exactly("gpu", ClassNVIDIAGPU, resourcev1.DeviceAllocationModeAll, 0))),
			template("all-fpgas", claimSpec(exactly("fpga", "fpga.example.com", resourcev1.DeviceAllocationModeAll, 0))),
			template("fpga", claimSpec(exactly("fpga", "fpga.example.com", "", 1))),
			template("neuron", claimSpec(exactly("n", ClassAWSNeuron, "", 4))),
			template("mixed", claimSpec(exactly("gpu", ClassNVIDIAGPU, "", 1), exactly("n", ClassAWSNeuron, "", 1))),
			template("missing-class", claimSpec(exactly("gpu", "gpu.example.com", "", 1))),
			template("declared", claimSpec(exactly("x", "accel.example.com", "", 2))),
			template("first-available", firstAvailable),
		},
		[]resourcev1.DeviceClass{class(ClassNVIDIAGPU, ""), class(ClassAWSNeuron, ""), class("fpga.example.com", ""),
			class("accel.example.com", "example.com/accel")},
	)
	o.CountUsers([]*corev1.Pod{pod("a", named("g", "shared")), pod("b", named("g", "shared")), pod("c", named("g", "two-gpus"))})
	return o
}

func TestModel(t *testing.T) {
	generated := pod("gen", fromTemplate("gpu", "one-gpu"))
	generated.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("generated-1")}}
	notYetGenerated := pod("gen2", fromTemplate("gpu", "one-gpu"))
	notYetGenerated.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("gone")}}
	both := gpus(1)
	both["aws.amazon.com/neuron"] = *resource.NewQuantity(1, resource.DecimalSI)
	cases := []struct {
		name string
		pod  *corev1.Pod
		want corev1.ResourceList
		// refusal is a part of the refusal's text; empty when the claim is modelled.
		refusal   string
		allocated bool
	}{
		{name: "no claims", pod: pod("none")},
		{name: "named claim, known class, count 2", pod: pod("n", named("gpu", "two-gpus")), want: gpus(2)},
		{name: "template, count defaults to 1", pod: pod("t", fromTemplate("gpu", "one-gpu")), want: gpus(1)},
		{name: "template's generated claim wins over the template", pod: generated, want: gpus(3)},
		{name: "generated claim not there yet: the template", pod: notYetGenerated, want: gpus(1)},
		{name: "All mode on a known class: at least one device", pod: pod("all", fromTemplate("gpu", "all-gpus")), want: gpus(1)},
		{name: "Neuron class", pod: pod("neuron", fromTemplate("n", "neuron")),
			want: corev1.ResourceList{"aws.amazon.com/neuron": *resource.NewQuantity(4, resource.DecimalSI)}},
		{name: "two requests, two classes", pod: pod("mixed", fromTemplate("m", "mixed")), want: both},
		{name: "two claims add up", pod: pod("two", fromTemplate("a", "one-gpu"), named("b", "two-gpus")), want: gpus(3)},
		{name: "class naming its extended resource", pod: pod("decl", fromTemplate("x", "declared")),
			want: corev1.ResourceList{"example.com/accel": *resource.NewQuantity(2, resource.DecimalSI)}},
		{name: "firstAvailable: the first subrequest that can be modelled", pod: pod("fa", fromTemplate("x", "first-available")), want: gpus(2)},
		{name: "unknown class", pod: pod("fpga", fromTemplate("f", "fpga")),
			refusal: `resource claim "f" (ResourceClaimTemplate fpga): request "fpga": DeviceClass "fpga.example.com" stands for no extended resource of the instance types (modelled classes: gpu.amd.com, gpu.nvidia.com, neuron.aws.com`},
		{name: "All mode on an unknown class", pod: pod("allf", fromTemplate("f", "all-fpgas")), refusal: `DeviceClass "fpga.example.com" stands for no extended resource`},
		{name: "DeviceClass missing", pod: pod("mc", fromTemplate("g", "missing-class")), refusal: `request "gpu": DeviceClass "gpu.example.com" does not exist`},
		{name: "CEL selectors", pod: pod("sel", named("g", "selector")), refusal: `(ResourceClaim selector): request "gpu": its CEL selectors`},
		{name: "constraints", pod: pod("con", named("g", "constraint")), refusal: "its constraints (matchAttribute, distinctAttribute)"},
		{name: "allocated claim", pod: pod("al", named("g", "allocated")), allocated: true,
			refusal: `resource claim "g" (ResourceClaim allocated): the claim is already allocated, to devices on node gpu-node-1; kube-scheduler places the pod there, and Joiner launches no capacity for it`},
		{name: "shared claim", pod: pod("sh", named("g", "shared")), refusal: "the ResourceClaim is shared by 2 pods"},
		{name: "named claim missing", pod: pod("mn", named("g", "nope")), refusal: `resource claim "g" (ResourceClaim nope): the ResourceClaim does not exist`},
		{name: "template missing", pod: pod("mt", fromTemplate("g", "nope")), refusal: `resource claim "g" (ResourceClaimTemplate nope): the ResourceClaimTemplate does not exist`},
		{name: "one bad claim refuses the pod", pod: pod("mix", fromTemplate("a", "one-gpu"), fromTemplate("b", "fpga")), refusal: `resource claim "b"`},
		{name: "claim entry with no source", pod: pod("ns", corev1.PodResourceClaim{Name: "x"}), refusal: "sets neither resourceClaimName nor resourceClaimTemplateName"},
	}
	o := objects()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, refusal := o.Model(tc.pod)
			if tc.refusal != "" {
				if refusal == nil {
					t.Fatalf("modelled as %v, want a refusal containing %q", got, tc.refusal)
				}
				if !strings.Contains(refusal.Error(), tc.refusal) {
					t.Errorf("refusal %q does not contain %q", refusal.Error(), tc.refusal)
				}
				if refusal.Allocated != tc.allocated {
					t.Errorf("Allocated = %v, want %v", refusal.Allocated, tc.allocated)
				}
				return
			}
			if refusal != nil {
				t.Fatalf("refused: %v", refusal)
			}
			if !equality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("Model = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestUsage(t *testing.T) {
	o := objects()
	generated := pod("gen", fromTemplate("gpu", "one-gpu"))
	generated.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("generated-1")}}
	cases := []struct {
		name string
		pods []*corev1.Pod
		want corev1.ResourceList
	}{
		{name: "no pods"},
		{name: "an allocated claim counts", pods: []*corev1.Pod{pod("a", named("g", "allocated"))}, want: gpus(1)},
		{name: "a shared claim counts once", pods: []*corev1.Pod{pod("a", named("g", "shared")), pod("b", named("g", "shared"))}, want: gpus(1)},
		{name: "each pod's template claim counts", pods: []*corev1.Pod{pod("a", fromTemplate("g", "one-gpu")), pod("b", fromTemplate("g", "one-gpu"))}, want: gpus(2)},
		{name: "generated claim", pods: []*corev1.Pod{generated}, want: gpus(3)},
		{name: "claims that cannot be modelled count nothing", pods: []*corev1.Pod{pod("a", fromTemplate("f", "fpga")), pod("b", named("g", "nope"))}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := o.Usage(tc.pods); !equality.Semantic.DeepEqual(got, tc.want) {
				t.Errorf("Usage = %v, want %v", got, tc.want)
			}
		})
	}
}
