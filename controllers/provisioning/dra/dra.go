// Package dra models a pod's Dynamic Resource Allocation claims (pod.spec.resourceClaims,
// resource.k8s.io/v1) for the scheduling simulation, when IGNORE_DRA_REQUESTS is false.
//
// The simulation knows instance types by the resources they carry, not by the ResourceSlices a DRA
// driver publishes once a node runs. So a claim is modelled only when each of its device requests
// asks for whole devices of a DeviceClass that stands for an extended resource the instance types
// carry (Classes: a small built-in table, or the class's own spec.extendedResourceName), in
// ExactCount or All mode, without CEL selectors, constraints, capacity or admin access. Such a
// claim becomes that many units of the extended resource (at least one for All mode), which the
// simulation then asks of the node. Every other claim is refused with a Refusal saying why, and
// the provisioner launches nothing for the pod: a claim that is already allocated is tied to its
// node (kube-scheduler's to place), and one Joiner cannot model could not be promised by a node
// it launches.
//
// It is pure: the objects of the cluster in, a verdict out.
package dra

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
)

// Known device classes: the DeviceClass names the vendors' DRA drivers install for whole devices,
// and the extended resource their device plugins advertise for the same devices, which the
// providers' GPU and accelerator instance types carry in their capacity.
const (
	// ClassNVIDIAGPU is the DeviceClass of NVIDIA's DRA driver for whole GPUs.
	ClassNVIDIAGPU = "gpu.nvidia.com"
	// ClassAMDGPU is the DeviceClass of AMD's DRA driver for whole GPUs.
	ClassAMDGPU = "gpu.amd.com"
	// ClassAWSNeuron is the DeviceClass of the AWS Neuron DRA driver (Inferentia, Trainium).
	ClassAWSNeuron = "neuron.aws.com"
)

// Classes returns the built-in table of device classes the simulation models, each with the
// extended resource that counts its devices on an instance type. A DeviceClass that sets
// spec.extendedResourceName is modelled as that resource instead, whatever its name.
func Classes() map[string]corev1.ResourceName {
	return map[string]corev1.ResourceName{
		ClassNVIDIAGPU: "nvidia.com/gpu",
		ClassAMDGPU:    "amd.com/gpu",
		ClassAWSNeuron: "aws.amazon.com/neuron",
	}
}

// Objects are the DRA objects of the cluster a round resolves pods' claims against.
type Objects struct {
	// Claims are the ResourceClaims, by namespace and name.
	Claims map[types.NamespacedName]*resourcev1.ResourceClaim
	// Templates are the ResourceClaimTemplates, by namespace and name.
	Templates map[types.NamespacedName]*resourcev1.ResourceClaimTemplate
	// DeviceClasses are the DeviceClasses, by name.
	DeviceClasses map[string]*resourcev1.DeviceClass
	// Known maps a device class name to its extended resource (Classes when nil).
	Known map[string]corev1.ResourceName
	// Users counts, per ResourceClaim named in pods' spec.resourceClaims, the pods that name it
	// (CountUsers): a claim shared by several pods puts them all on one node.
	Users map[types.NamespacedName]int
}

// NewObjects indexes lists of the cluster's DRA objects, with the built-in Classes.
func NewObjects(claims []resourcev1.ResourceClaim, templates []resourcev1.ResourceClaimTemplate, classes []resourcev1.DeviceClass) *Objects {
	o := &Objects{
		Claims:        map[types.NamespacedName]*resourcev1.ResourceClaim{},
		Templates:     map[types.NamespacedName]*resourcev1.ResourceClaimTemplate{},
		DeviceClasses: map[string]*resourcev1.DeviceClass{},
		Known:         Classes(),
		Users:         map[types.NamespacedName]int{},
	}
	for i := range claims {
		o.Claims[types.NamespacedName{Namespace: claims[i].Namespace, Name: claims[i].Name}] = &claims[i]
	}
	for i := range templates {
		o.Templates[types.NamespacedName{Namespace: templates[i].Namespace, Name: templates[i].Name}] = &templates[i]
	}
	for i := range classes {
		o.DeviceClasses[classes[i].Name] = &classes[i]
	}
	return o
}

// CountUsers records, for every ResourceClaim the pods name directly (resourceClaimName), how many
// of them name it. Pass every pod that is not terminal, bound or pending.
func (o *Objects) CountUsers(pods []*corev1.Pod) {
	for _, pod := range pods {
		for _, pc := range pod.Spec.ResourceClaims {
			if pc.ResourceClaimName != nil {
				o.Users[types.NamespacedName{Namespace: pod.Namespace, Name: *pc.ResourceClaimName}]++
			}
		}
	}
}

// Refusal says why a pod's claim cannot be modelled; the pod is left to kube-scheduler and no
// capacity is launched for it.
type Refusal struct {
	// Claim is the entry of the pod's spec.resourceClaims.
	Claim string
	// Object names the object read: "ResourceClaim <name>" or "ResourceClaimTemplate <name>".
	Object string
	// Reason says why.
	Reason string
	// Allocated is set when the claim is already allocated: its devices, and so its node, are
	// chosen.
	Allocated bool
}

// Error is the refusal as a sentence naming the claim.
func (r *Refusal) Error() string {
	if r.Object == "" {
		return fmt.Sprintf("resource claim %q: %s", r.Claim, r.Reason)
	}
	return fmt.Sprintf("resource claim %q (%s): %s", r.Claim, r.Object, r.Reason)
}

// HasClaims reports whether the pod makes DRA requests.
func HasClaims(pod *corev1.Pod) bool { return len(pod.Spec.ResourceClaims) > 0 }

// Model returns the extended resources that stand for every claim of the pod in the simulation
// (nil when it has none), or the refusal of the first claim that cannot be modelled.
func (o *Objects) Model(pod *corev1.Pod) (corev1.ResourceList, *Refusal) {
	var total corev1.ResourceList
	for _, pc := range pod.Spec.ResourceClaims {
		spec, _, object, refusal := o.resolve(pod, pc, true)
		if refusal != nil {
			refusal.Claim, refusal.Object = pc.Name, object
			return nil, refusal
		}
		devices, reason := o.devices(spec)
		if reason != "" {
			return nil, &Refusal{Claim: pc.Name, Object: object, Reason: reason}
		}
		total = Add(total, devices)
	}
	return total, nil
}

// Usage returns the devices that the claims of pods (the pods bound or nominated to one node)
// hold or will hold there, as the simulation's extended resources: each claim once, however many
// of the pods share it, allocated or not; a claim that cannot be modelled counts nothing.
func (o *Objects) Usage(pods []*corev1.Pod) corev1.ResourceList {
	var total corev1.ResourceList
	seen := map[types.NamespacedName]bool{}
	for _, pod := range pods {
		for _, pc := range pod.Spec.ResourceClaims {
			spec, key, _, refusal := o.resolve(pod, pc, false)
			if refusal != nil || seen[key] {
				continue
			}
			seen[key] = true
			if devices, reason := o.devices(spec); reason == "" {
				total = Add(total, devices)
			}
		}
	}
	return total
}

// resolve returns the spec of the pod's claim pc, the key of the claim (a template's: the pod's
// own, by pod UID and entry) and the object it was read from: the ResourceClaim it names; for a
// template, the ResourceClaim generated from it when pod.status.resourceClaimStatuses names one
// that exists, else the template's spec. For a pending pod, an allocated or shared ResourceClaim
// is refused.
func (o *Objects) resolve(pod *corev1.Pod, pc corev1.PodResourceClaim, pending bool) (*resourcev1.ResourceClaimSpec, types.NamespacedName, string, *Refusal) {
	var key types.NamespacedName
	switch {
	case pc.ResourceClaimName != nil:
		key = types.NamespacedName{Namespace: pod.Namespace, Name: *pc.ResourceClaimName}
		object := "ResourceClaim " + key.Name
		claim := o.Claims[key]
		if claim == nil {
			return nil, key, object, &Refusal{Reason: "the ResourceClaim does not exist"}
		}
		if r := allocated(claim); r != nil && pending {
			return nil, key, object, r
		}
		if n := o.Users[key]; n > 1 && pending {
			return nil, key, object, &Refusal{Reason: fmt.Sprintf("the ResourceClaim is shared by %d pods, which must all run on the node of its devices; Joiner does not model shared claims", n)}
		}
		return &claim.Spec, key, object, nil
	case pc.ResourceClaimTemplateName != nil:
		key = types.NamespacedName{Namespace: pod.Namespace, Name: string(pod.UID) + "/" + pc.Name}
		if name := generatedClaim(pod, pc.Name); name != "" {
			if claim := o.Claims[types.NamespacedName{Namespace: pod.Namespace, Name: name}]; claim != nil {
				if r := allocated(claim); r != nil && pending {
					return nil, key, "ResourceClaim " + name, r
				}
				return &claim.Spec, key, "ResourceClaim " + name, nil
			}
		}
		object := "ResourceClaimTemplate " + *pc.ResourceClaimTemplateName
		tmpl := o.Templates[types.NamespacedName{Namespace: pod.Namespace, Name: *pc.ResourceClaimTemplateName}]
		if tmpl == nil {
			return nil, key, object, &Refusal{Reason: "the ResourceClaimTemplate does not exist"}
		}
		return &tmpl.Spec.Spec, key, object, nil
	}
	return nil, key, "", &Refusal{Reason: "it sets neither resourceClaimName nor resourceClaimTemplateName"}
}

// generatedClaim is the name of the ResourceClaim generated for the pod's claim entry, from
// pod.status.resourceClaimStatuses; "" when there is none yet.
func generatedClaim(pod *corev1.Pod, entry string) string {
	for _, s := range pod.Status.ResourceClaimStatuses {
		if s.Name == entry && s.ResourceClaimName != nil {
			return *s.ResourceClaimName
		}
	}
	return ""
}

// allocated refuses a claim that is already allocated: its devices are on one node, where only
// kube-scheduler can place the pod.
func allocated(claim *resourcev1.ResourceClaim) *Refusal {
	a := claim.Status.Allocation
	if a == nil {
		return nil
	}
	where := "the node of its devices"
	if node := allocatedNode(a.NodeSelector); node != "" {
		where = "node " + node
	}
	return &Refusal{Allocated: true,
		Reason: "the claim is already allocated, to devices on " + where + "; kube-scheduler places the pod there, and Joiner launches no capacity for it"}
}

// allocatedNode is the node name an allocation's node selector pins (a metadata.name field or a
// kubernetes.io/hostname label In one value); "" otherwise.
func allocatedNode(sel *corev1.NodeSelector) string {
	if sel == nil || len(sel.NodeSelectorTerms) != 1 {
		return ""
	}
	term := sel.NodeSelectorTerms[0]
	for _, r := range slices.Concat(term.MatchFields, term.MatchExpressions) {
		if (r.Key == "metadata.name" || r.Key == corev1.LabelHostname) && r.Operator == corev1.NodeSelectorOpIn && len(r.Values) == 1 {
			return r.Values[0]
		}
	}
	return ""
}

// devices returns the extended resources that stand for the claim's requests, or why it cannot
// be modelled.
func (o *Objects) devices(spec *resourcev1.ResourceClaimSpec) (corev1.ResourceList, string) {
	if len(spec.Devices.Constraints) > 0 {
		return nil, "its constraints (matchAttribute, distinctAttribute) need the devices' attributes, which Joiner cannot know before a node runs the driver"
	}
	var total corev1.ResourceList
	for _, req := range spec.Devices.Requests {
		var devices corev1.ResourceList
		var reason string
		switch {
		case req.Exactly != nil:
			e := req.Exactly
			devices, reason = o.request(req.Name, e.DeviceClassName, e.AllocationMode, e.Count, len(e.Selectors) > 0, e.Capacity != nil, e.AdminAccess != nil && *e.AdminAccess)
		case len(req.FirstAvailable) > 0:
			devices, reason = o.firstAvailable(req)
		default:
			reason = fmt.Sprintf("request %q sets neither exactly nor firstAvailable", req.Name)
		}
		if reason != "" {
			return nil, reason
		}
		total = Add(total, devices)
	}
	return total, ""
}

// firstAvailable models the first subrequest that can be modelled: a node with those devices can
// serve the request, whichever subrequest kube-scheduler ends up choosing. It refuses with the
// reason of the first subrequest when none can.
func (o *Objects) firstAvailable(req resourcev1.DeviceRequest) (corev1.ResourceList, string) {
	first := ""
	for _, sub := range req.FirstAvailable {
		devices, reason := o.request(req.Name+"/"+sub.Name, sub.DeviceClassName, sub.AllocationMode, sub.Count, len(sub.Selectors) > 0, sub.Capacity != nil, false)
		if reason == "" {
			return devices, ""
		}
		if first == "" {
			first = reason
		}
	}
	return nil, first
}

// request models one request for devices of class, or says why it cannot.
func (o *Objects) request(name, class string, mode resourcev1.DeviceAllocationMode, count int64, selectors, capacity, admin bool) (corev1.ResourceList, string) {
	dc := o.DeviceClasses[class]
	if dc == nil {
		return nil, fmt.Sprintf("request %q: DeviceClass %q does not exist", name, class)
	}
	res := o.resourceOf(dc)
	if res == "" {
		return nil, fmt.Sprintf("request %q: DeviceClass %q stands for no extended resource of the instance types (modelled classes: %s, or a class with spec.extendedResourceName)",
			name, class, strings.Join(slices.Sorted(maps.Keys(o.known())), ", "))
	}
	switch {
	case selectors:
		return nil, fmt.Sprintf("request %q: its CEL selectors need the devices' attributes, which Joiner cannot evaluate against instance types", name)
	case capacity:
		return nil, fmt.Sprintf("request %q: it asks for a share of a device's capacity, which Joiner does not model", name)
	case admin:
		return nil, fmt.Sprintf("request %q: adminAccess requests do not consume devices and are not modelled", name)
	}
	switch mode {
	case resourcev1.DeviceAllocationModeExactCount, "":
		if count <= 0 {
			count = 1
		}
	case resourcev1.DeviceAllocationModeAll:
		// Every device of the class on the node: the node must have at least one.
		count = 1
	default:
		return nil, fmt.Sprintf("request %q: allocationMode %q is not known", name, mode)
	}
	return corev1.ResourceList{res: *resource.NewQuantity(count, resource.DecimalSI)}, ""
}

// resourceOf is the extended resource the class stands for: its spec.extendedResourceName, else
// the known table's; "" when neither names one.
func (o *Objects) resourceOf(dc *resourcev1.DeviceClass) corev1.ResourceName {
	if n := dc.Spec.ExtendedResourceName; n != nil && *n != "" {
		return corev1.ResourceName(*n)
	}
	return o.known()[dc.Name]
}

func (o *Objects) known() map[string]corev1.ResourceName {
	if o.Known == nil {
		return Classes()
	}
	return o.Known
}

// Add adds b to a and returns a (a new list when a is nil); b is not changed.
func Add(a, b corev1.ResourceList) corev1.ResourceList {
	if a == nil {
		a = corev1.ResourceList{}
	}
	for name, q := range b {
		sum := a[name]
		sum.Add(q)
		a[name] = sum
	}
	return a
}
