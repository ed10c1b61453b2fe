package scheduling

import (
	"maps"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Indices of the resources every pod and node has, kept in a fixed array so that fit checks do
// not touch maps.
const (
	resCPU     = iota // millicores
	resMemory         // bytes
	resPods           // count
	resStorage        // ephemeral-storage bytes
	numCore
)

var coreNames = [numCore]corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage}

// vec is an amount of resources: the four core ones in an array and any other (extended)
// resource in milli-units in a map that is nil for almost every pod. A vec is a value; methods
// that change it copy the map first.
type vec struct {
	core     [numCore]int64
	extended map[corev1.ResourceName]int64
}

func coreIndex(name corev1.ResourceName) int {
	for i, n := range coreNames {
		if n == name {
			return i
		}
	}
	return -1
}

// vecOf converts a resource list; negative quantities count as zero.
func vecOf(rl corev1.ResourceList) vec {
	var v vec
	for name, q := range rl {
		v.set(name, q)
	}
	return v
}

func (v *vec) set(name corev1.ResourceName, q resource.Quantity) {
	var n int64
	switch i := coreIndex(name); i {
	case resCPU:
		n = q.MilliValue()
	case -1:
		n = q.MilliValue()
	default:
		n = q.Value()
	}
	n = max(n, 0)
	if i := coreIndex(name); i >= 0 {
		v.core[i] = n
		return
	}
	if n == 0 {
		delete(v.extended, name) // a zero extended resource is absent
		return
	}
	if v.extended == nil {
		v.extended = map[corev1.ResourceName]int64{}
	}
	v.extended[name] = n
}

// unknownCapacity stands for a pod-count or ephemeral-storage capacity a node or instance type
// does not report: large enough never to bind, small enough never to overflow a sum.
const unknownCapacity = int64(1) << 60

// capacityOf converts an allocatable capacity. A node or instance type that does not report pods
// or ephemeral-storage is taken not to limit them; cpu, memory and extended resources it does not
// report are zero.
func capacityOf(rl corev1.ResourceList) vec {
	v := vecOf(rl)
	for _, i := range []int{resPods, resStorage} {
		if _, ok := rl[coreNames[i]]; !ok {
			v.core[i] = unknownCapacity
		}
	}
	return v
}

// list converts back to a resource list, leaving out zero extended resources.
func (v vec) list() corev1.ResourceList {
	out := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(v.core[resCPU], resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(v.core[resMemory], resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(v.core[resPods], resource.DecimalSI),
	}
	if v.core[resStorage] > 0 {
		out[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(v.core[resStorage], resource.BinarySI)
	}
	for name, n := range v.extended {
		if n > 0 {
			out[name] = *resource.NewMilliQuantity(n, resource.DecimalSI)
		}
	}
	return out
}

// plus returns v+o.
func (v vec) plus(o vec) vec {
	out := vec{}
	for i := range v.core {
		out.core[i] = v.core[i] + o.core[i]
	}
	if v.extended != nil || o.extended != nil {
		out.extended = maps.Clone(v.extended)
		if out.extended == nil {
			out.extended = map[corev1.ResourceName]int64{}
		}
		for name, n := range o.extended {
			out.extended[name] += n
		}
	}
	return out
}

// minus returns v−o, never below zero.
func (v vec) minus(o vec) vec {
	out := vec{}
	for i := range v.core {
		out.core[i] = max(v.core[i]-o.core[i], 0)
	}
	if v.extended != nil {
		out.extended = maps.Clone(v.extended)
		for name, n := range o.extended {
			if _, ok := out.extended[name]; ok {
				out.extended[name] = max(out.extended[name]-n, 0)
			}
		}
	}
	return out
}

// maxOf returns the element-wise maximum.
func maxOf(a, b vec) vec {
	out := vec{}
	for i := range a.core {
		out.core[i] = max(a.core[i], b.core[i])
	}
	if a.extended != nil || b.extended != nil {
		out.extended = maps.Clone(a.extended)
		if out.extended == nil {
			out.extended = map[corev1.ResourceName]int64{}
		}
		for name, n := range b.extended {
			out.extended[name] = max(out.extended[name], n)
		}
	}
	return out
}

// fitsSum reports whether a+b fits within capacity, without building the sum.
func fitsSum(a, b *vec, capacity *vec) bool {
	for i := range a.core {
		if a.core[i]+b.core[i] > capacity.core[i] {
			return false
		}
	}
	if a.extended == nil && b.extended == nil {
		return true
	}
	for name, n := range a.extended {
		if n+b.extended[name] > capacity.extended[name] {
			return false
		}
	}
	for name, n := range b.extended {
		if _, counted := a.extended[name]; !counted && n > capacity.extended[name] {
			return false
		}
	}
	return true
}

// fitsCore reports whether the core resources of a+b fit in capacity; extended resources are
// checked separately by the callers that have any.
func fitsCore(a, b *vec, capacity *[numCore]int64) bool {
	return a.core[0]+b.core[0] <= capacity[0] && a.core[1]+b.core[1] <= capacity[1] &&
		a.core[2]+b.core[2] <= capacity[2] && a.core[3]+b.core[3] <= capacity[3]
}

// podRequests returns what a pod needs from a node, as kube-scheduler counts it: the larger of
// its app containers plus restartable (sidecar) init containers, and the peak of its init
// containers run in order; then, for each resource the pod-level spec.resources.requests sets
// (cpu, memory and hugepages, the resources pod-level resources support), that request instead;
// plus the pod overhead and one pod slot.
func podRequests(pod *corev1.Pod) vec {
	var apps vec
	for i := range pod.Spec.Containers {
		apps = apps.plus(vecOf(pod.Spec.Containers[i].Resources.Requests))
	}
	var sidecars, initPeak vec
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		r := vecOf(c.Resources.Requests)
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			sidecars = sidecars.plus(r)
			initPeak = maxOf(initPeak, sidecars)
			continue
		}
		initPeak = maxOf(initPeak, sidecars.plus(r))
	}
	out := maxOf(apps.plus(sidecars), initPeak)
	if pod.Spec.Resources != nil {
		for name, q := range pod.Spec.Resources.Requests {
			if podLevelResource(name) {
				out.set(name, q)
			}
		}
	}
	out = out.plus(vecOf(pod.Spec.Overhead))
	out.core[resPods] = 1
	return out
}

// podLevelResource reports whether a pod-level request of the resource counts (Kubernetes 1.34
// pod-level resources): cpu, memory and hugepages-<size>. The API server refuses others.
func podLevelResource(name corev1.ResourceName) bool {
	return name == corev1.ResourceCPU || name == corev1.ResourceMemory || strings.HasPrefix(string(name), corev1.ResourceHugePagesPrefix)
}
