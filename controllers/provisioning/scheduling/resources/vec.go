package resources

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// CPU, Memory, Pods and Storage are the indices of the resources every pod and node has, kept
// in a fixed array so that fit checks do not touch maps; NumCore is how many there are.
const (
	CPU     = iota // millicores
	Memory         // bytes
	Pods           // count
	Storage        // ephemeral-storage bytes
	NumCore
)

// CoreName is the name of core resource i (CPU, Memory, Pods or Storage).
func CoreName(i int) corev1.ResourceName { return coreNames()[i] }

func coreNames() [NumCore]corev1.ResourceName {
	return [NumCore]corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage}
}

// Vec is an amount of resources: the four core ones in an array and any other (extended)
// resource in milli-units in a map that is nil for almost every pod. A Vec is a value; methods
// that change it copy the map first.
type Vec struct {
	Core     [NumCore]int64
	Extended map[corev1.ResourceName]int64
}

// CoreIndex is the index of a core resource, -1 for any other (extended) resource.
func CoreIndex(name corev1.ResourceName) int {
	switch name {
	case corev1.ResourceCPU:
		return CPU
	case corev1.ResourceMemory:
		return Memory
	case corev1.ResourcePods:
		return Pods
	case corev1.ResourceEphemeralStorage:
		return Storage
	}
	return -1
}

// Of converts a resource list; negative quantities count as zero.
func Of(rl corev1.ResourceList) Vec {
	var v Vec
	for name, q := range rl {
		v.Set(name, q)
	}
	return v
}

// Set sets resource name to q (cpu and extended resources in milli-units, the others in units),
// never below zero; a zero extended resource is left out.
func (v *Vec) Set(name corev1.ResourceName, q resource.Quantity) {
	var n int64
	switch i := CoreIndex(name); i {
	case CPU:
		n = q.MilliValue()
	case -1:
		n = q.MilliValue()
	default:
		n = q.Value()
	}
	n = max(n, 0)
	if i := CoreIndex(name); i >= 0 {
		v.Core[i] = n
		return
	}
	if n == 0 {
		delete(v.Extended, name) // a zero extended resource is absent
		return
	}
	if v.Extended == nil {
		v.Extended = map[corev1.ResourceName]int64{}
	}
	v.Extended[name] = n
}

// UnknownCapacity stands for a pod-count or ephemeral-storage capacity a node or instance type
// does not report: large enough never to bind, small enough never to overflow a sum.
const UnknownCapacity = int64(1) << 60

// CapacityOf converts an allocatable capacity. A node or instance type that does not report pods
// or ephemeral-storage is taken not to limit them; cpu, memory and extended resources it does not
// report are zero.
func CapacityOf(rl corev1.ResourceList) Vec {
	v := Of(rl)
	for _, i := range []int{Pods, Storage} {
		if _, ok := rl[CoreName(i)]; !ok {
			v.Core[i] = UnknownCapacity
		}
	}
	return v
}

// List converts back to a resource list, leaving out zero extended resources.
func (v Vec) List() corev1.ResourceList {
	out := corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewMilliQuantity(v.Core[CPU], resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(v.Core[Memory], resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(v.Core[Pods], resource.DecimalSI),
	}
	if v.Core[Storage] > 0 {
		out[corev1.ResourceEphemeralStorage] = *resource.NewQuantity(v.Core[Storage], resource.BinarySI)
	}
	for name, n := range v.Extended {
		if n > 0 {
			out[name] = *resource.NewMilliQuantity(n, resource.DecimalSI)
		}
	}
	return out
}

// Plus returns v+o.
func (v Vec) Plus(o Vec) Vec {
	out := Vec{}
	for i := range v.Core {
		out.Core[i] = v.Core[i] + o.Core[i]
	}
	if v.Extended != nil || o.Extended != nil {
		out.Extended = maps.Clone(v.Extended)
		if out.Extended == nil {
			out.Extended = map[corev1.ResourceName]int64{}
		}
		for name, n := range o.Extended {
			out.Extended[name] += n
		}
	}
	return out
}

// Minus returns v−o, never below zero.
func (v Vec) Minus(o Vec) Vec {
	out := Vec{}
	for i := range v.Core {
		out.Core[i] = max(v.Core[i]-o.Core[i], 0)
	}
	if v.Extended != nil {
		out.Extended = maps.Clone(v.Extended)
		for name, n := range o.Extended {
			if _, ok := out.Extended[name]; ok {
				out.Extended[name] = max(out.Extended[name]-n, 0)
			}
		}
	}
	return out
}

// Max returns the element-wise maximum.
func Max(a, b Vec) Vec {
	out := Vec{}
	for i := range a.Core {
		out.Core[i] = max(a.Core[i], b.Core[i])
	}
	if a.Extended != nil || b.Extended != nil {
		out.Extended = maps.Clone(a.Extended)
		if out.Extended == nil {
			out.Extended = map[corev1.ResourceName]int64{}
		}
		for name, n := range b.Extended {
			out.Extended[name] = max(out.Extended[name], n)
		}
	}
	return out
}

// FitsSum reports whether a+b fits within capacity, without building the sum.
func FitsSum(a, b *Vec, capacity *Vec) bool {
	for i := range a.Core {
		if a.Core[i]+b.Core[i] > capacity.Core[i] {
			return false
		}
	}
	if a.Extended == nil && b.Extended == nil {
		return true
	}
	for name, n := range a.Extended {
		if n+b.Extended[name] > capacity.Extended[name] {
			return false
		}
	}
	for name, n := range b.Extended {
		if _, counted := a.Extended[name]; !counted && n > capacity.Extended[name] {
			return false
		}
	}
	return true
}

// FitsCore reports whether the core resources of a+b fit in capacity; extended resources are
// checked separately by the callers that have any.
func FitsCore(a, b *Vec, capacity *[NumCore]int64) bool {
	return a.Core[0]+b.Core[0] <= capacity[0] && a.Core[1]+b.Core[1] <= capacity[1] &&
		a.Core[2]+b.Core[2] <= capacity[2] && a.Core[3]+b.Core[3] <= capacity[3]
}

// Add adds o to v, reusing v's map of extended resources when it has one.
func (v *Vec) Add(o *Vec) {
	for i := range v.Core {
		v.Core[i] += o.Core[i]
	}
	for name, n := range o.Extended {
		if v.Extended == nil {
			v.Extended = map[corev1.ResourceName]int64{}
		}
		v.Extended[name] += n
	}
}

// Sub subtracts o from v, never below zero, reusing v's map of extended resources.
func (v *Vec) Sub(o *Vec) {
	for i := range v.Core {
		v.Core[i] = max(v.Core[i]-o.Core[i], 0)
	}
	for name, n := range o.Extended {
		if _, ok := v.Extended[name]; ok {
			v.Extended[name] = max(v.Extended[name]-n, 0)
		}
	}
}

// Describe formats the cpu, memory and pods of v, plus any extended resource.
func Describe(v Vec) string {
	l := v.List()
	out := ""
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory, corev1.ResourcePods, corev1.ResourceEphemeralStorage} {
		if q, ok := l[name]; ok {
			if out != "" {
				out += ", "
			}
			out += string(name) + " " + q.String()
		}
	}
	for name, q := range l {
		if CoreIndex(name) < 0 {
			out += ", " + string(name) + " " + q.String()
		}
	}
	return out
}
