package cloudprovider

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/joiner-dev/joiner/requirements"
)

// InstanceType is a machine shape a provider can launch: its labels, how it can be bought, its
// capacity and what the kubelet and system keep for themselves.
//
// Do not change Capacity or Overhead after the first call to Allocatable, which is computed once.
type InstanceType struct {
	// Name is the provider's name of the type, the node.kubernetes.io/instance-type value.
	Name string
	// Requirements are the labels a node of this type has or may have (instance type, arch, os,
	// zones, capacity types, provider-specific labels such as the family). Offerings narrow the
	// zone and capacity type further.
	Requirements requirements.Requirements
	// Offerings are the zone and capacity-type combinations the type is sold in.
	Offerings Offerings
	// Capacity is the full capacity of a node of this type (cpu, memory, pods, ...).
	Capacity corev1.ResourceList
	// Overhead is what is reserved out of Capacity.
	Overhead Overhead

	allocatableOnce sync.Once
	allocatable     corev1.ResourceList
}

// Overhead is the part of a node's capacity that pods cannot request.
type Overhead struct {
	// KubeReserved is reserved for the kubelet and container runtime.
	KubeReserved corev1.ResourceList
	// SystemReserved is reserved for operating-system daemons.
	SystemReserved corev1.ResourceList
	// EvictionThreshold is the free amount below which the kubelet evicts pods (evictionHard).
	EvictionThreshold corev1.ResourceList
}

// Total returns the sum of the three reservations.
func (o Overhead) Total() corev1.ResourceList {
	out := corev1.ResourceList{}
	for _, l := range []corev1.ResourceList{o.KubeReserved, o.SystemReserved, o.EvictionThreshold} {
		for name, q := range l {
			sum := out[name]
			sum.Add(q)
			out[name] = sum
		}
	}
	return out
}

// Allocatable returns the capacity pods can request: Capacity minus Overhead, never below zero.
// It is computed on the first call and shared afterwards; do not modify the result.
func (it *InstanceType) Allocatable() corev1.ResourceList {
	it.allocatableOnce.Do(func() {
		total := it.Overhead.Total()
		out := make(corev1.ResourceList, len(it.Capacity))
		for name, q := range it.Capacity {
			left := q.DeepCopy()
			if o, ok := total[name]; ok {
				left.Sub(o)
			}
			if left.Sign() < 0 {
				left = *resource.NewQuantity(0, q.Format)
			}
			out[name] = left
		}
		it.allocatable = out
	})
	return it.allocatable
}

// CheapestOffering returns the cheapest available offering compatible with reqs, and false when
// the type cannot be bought under them.
func (it *InstanceType) CheapestOffering(reqs requirements.Requirements) (*Offering, bool) {
	return it.Offerings.CheapestCompatible(reqs)
}

// CompatibleWith reports whether a node of this type, bought through some available offering,
// can satisfy reqs on every key both constrain.
func (it *InstanceType) CompatibleWith(reqs requirements.Requirements) bool {
	if _, conflict := reqs.FirstConflict(it.Requirements); conflict {
		return false
	}
	_, ok := it.CheapestOffering(reqs)
	return ok
}

// Fits reports whether requests fit the type's allocatable capacity. A resource the type does not
// list counts as zero.
func (it *InstanceType) Fits(requests corev1.ResourceList) bool {
	alloc := it.Allocatable()
	for name, q := range requests {
		if q.Sign() <= 0 {
			continue
		}
		a, ok := alloc[name]
		if !ok || a.Cmp(q) < 0 {
			return false
		}
	}
	return true
}

// InstanceTypes is a list of instance types.
type InstanceTypes []*InstanceType

// Compatible returns the types that can satisfy reqs through an available offering.
func (its InstanceTypes) Compatible(reqs requirements.Requirements) InstanceTypes {
	return filter(its, func(it *InstanceType) bool { return it.CompatibleWith(reqs) })
}

// OrderByPrice returns a copy of the list sorted by the price of each type's cheapest available
// offering compatible with reqs, cheapest first; types without one come last. Ties keep name order.
func (its InstanceTypes) OrderByPrice(reqs requirements.Requirements) InstanceTypes {
	type priced struct {
		it    *InstanceType
		price float64
	}
	ps := make([]priced, len(its))
	for i, it := range its {
		ps[i] = priced{it: it, price: math.Inf(1)}
		if o, ok := it.CheapestOffering(reqs); ok {
			ps[i].price = o.Price
		}
	}
	slices.SortStableFunc(ps, func(a, b priced) int {
		if c := cmp.Compare(a.price, b.price); c != 0 {
			return c
		}
		return cmp.Compare(a.it.Name, b.it.Name)
	})
	out := make(InstanceTypes, len(ps))
	for i, p := range ps {
		out[i] = p.it
	}
	return out
}

// Names returns the names of the types, in order.
func (its InstanceTypes) Names() []string {
	out := make([]string, len(its))
	for i, it := range its {
		out[i] = it.Name
	}
	return out
}

// distinctValues counts the distinct values the types allow for key (a type allowing a whole
// complement counts as unbounded).
func (its InstanceTypes) distinctValues(key string) int {
	seen := map[string]struct{}{}
	for _, it := range its {
		r, ok := it.Requirements.Get(key)
		if !ok {
			continue
		}
		if r.IsComplement() {
			return math.MaxInt
		}
		for _, v := range r.Values() {
			seen[v] = struct{}{}
		}
	}
	return len(seen)
}

// SatisfiesMinValues returns nil when, for every requirement of reqs with minValues, the types
// together allow at least that many distinct values of its key. The error names the key, the
// minimum and what the types offer.
func (its InstanceTypes) SatisfiesMinValues(reqs requirements.Requirements) error {
	for _, r := range reqs.Items() {
		if r.MinValues() == 0 {
			continue
		}
		if n := its.distinctValues(r.Key()); n < r.MinValues() {
			return fmt.Errorf("minValues of %s is %d but the %d remaining instance types offer %d distinct values; lower minValues or allow more instance types", r.Key(), r.MinValues(), len(its), n)
		}
	}
	return nil
}

// Truncate returns at most limit types from a list sorted cheapest first. When reqs carry
// minValues that the first limit types do not meet, it adds, in order, only the further types that
// bring a value still missing. It fails when even the whole list does not meet them.
func (its InstanceTypes) Truncate(reqs requirements.Requirements, limit int) (InstanceTypes, error) {
	if limit <= 0 || len(its) <= limit {
		return its, its.SatisfiesMinValues(reqs)
	}
	out := slices.Clone(its[:limit])
	if !reqs.HasMinValues() || out.SatisfiesMinValues(reqs) == nil {
		return out, nil
	}
	seen := map[string]map[string]struct{}{}
	for _, r := range reqs.Items() {
		if r.MinValues() > 0 {
			seen[r.Key()] = map[string]struct{}{}
		}
	}
	for _, it := range out {
		addValues(seen, it)
	}
	for _, it := range its[limit:] {
		if addValues(seen, it) {
			out = append(out, it)
			if out.SatisfiesMinValues(reqs) == nil {
				return out, nil
			}
		}
	}
	return its, its.SatisfiesMinValues(reqs)
}

// addValues records the values it allows for each key of seen, reporting whether any was new.
func addValues(seen map[string]map[string]struct{}, it *InstanceType) bool {
	added := false
	for key, values := range seen {
		r, ok := it.Requirements.Get(key)
		if !ok {
			continue
		}
		for _, v := range r.Values() {
			if _, dup := values[v]; !dup {
				values[v] = struct{}{}
				added = true
			}
		}
	}
	return added
}
