package cloudprovider

import (
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/requirements"
)

// Offering is one way to buy an instance type: a zone and capacity type (and possibly more, such
// as a capacity reservation) at a price, available or not right now.
type Offering struct {
	// Requirements are the labels the offering fixes; at least topology.kubernetes.io/zone and
	// karpenter.sh/capacity-type, each with a single value.
	Requirements requirements.Requirements
	// Price is the hourly price in US dollars.
	Price float64
	// Available is false while the offering is known to lack capacity (or has no price).
	Available bool
}

// NewOffering returns an offering in a zone with a capacity type ("spot", "on-demand",
// "reserved").
func NewOffering(zone, capacityType string, price float64, available bool) *Offering {
	return &Offering{
		Requirements: requirements.New(
			requirements.In(karpv1.LabelTopologyZone, zone),
			requirements.In(karpv1.CapacityTypeLabelKey, capacityType),
		),
		Price:     price,
		Available: available,
	}
}

// Zone returns the offering's zone, or "" when it does not fix one.
func (o *Offering) Zone() string { return o.single(karpv1.LabelTopologyZone) }

// CapacityType returns the offering's capacity type, or "" when it does not fix one.
func (o *Offering) CapacityType() string { return o.single(karpv1.CapacityTypeLabelKey) }

func (o *Offering) single(key string) string {
	r, ok := o.Requirements.Get(key)
	if !ok {
		return ""
	}
	v, _ := r.Single()
	return v
}

// CompatibleWith reports whether a node with the offering's labels can satisfy reqs on every key
// both constrain. It does not allocate.
func (o *Offering) CompatibleWith(reqs requirements.Requirements) bool {
	_, conflict := reqs.FirstConflict(o.Requirements)
	return !conflict
}

// Offerings is a list of offerings.
type Offerings []*Offering

// Available returns the available offerings.
func (ofs Offerings) Available() Offerings {
	return filter(ofs, func(o *Offering) bool { return o.Available })
}

// Compatible returns the offerings compatible with reqs.
func (ofs Offerings) Compatible(reqs requirements.Requirements) Offerings {
	return filter(ofs, func(o *Offering) bool { return o.CompatibleWith(reqs) })
}

// filter returns the elements of s that keep accepts, in order; nil when there are none.
func filter[S ~[]E, E any](s S, keep func(E) bool) S {
	var out S
	for _, e := range s {
		if keep(e) {
			out = append(out, e)
		}
	}
	return out
}

// Cheapest returns the cheapest offering (the first of equal price), or nil when there are none.
func (ofs Offerings) Cheapest() *Offering {
	var best *Offering
	for _, o := range ofs {
		if best == nil || o.Price < best.Price {
			best = o
		}
	}
	return best
}

// CheapestCompatible returns the cheapest available offering compatible with reqs, without
// allocating, and false when there is none.
func (ofs Offerings) CheapestCompatible(reqs requirements.Requirements) (*Offering, bool) {
	var best *Offering
	for _, o := range ofs {
		if !o.Available || (best != nil && o.Price >= best.Price) || !o.CompatibleWith(reqs) {
			continue
		}
		best = o
	}
	return best, best != nil
}
