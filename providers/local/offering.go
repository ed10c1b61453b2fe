package local

import (
	"cmp"

	corev1 "k8s.io/api/core/v1"

	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/requirements"
)

// offeringChoice is an instance type and one of its offerings.
type offeringChoice struct {
	it *cloudprovider.InstanceType
	o  *cloudprovider.Offering
}

// cheaper orders choices by price, then type name, zone and capacity type, so that picks are
// deterministic.
func (c offeringChoice) cheaper(than offeringChoice) bool {
	if than.it == nil {
		return true
	}
	return cmp.Or(
		cmp.Compare(c.o.Price, than.o.Price),
		cmp.Compare(c.it.Name, than.it.Name),
		cmp.Compare(c.o.Zone(), than.o.Zone()),
		cmp.Compare(c.o.CapacityType(), than.o.CapacityType()),
	) < 0
}

// pickOffering returns the cheapest available offering compatible with reqs of a type that fits
// requests and is not short of capacity, and the cheapest of those that are short.
func pickOffering(types cloudprovider.InstanceTypes, reqs requirements.Requirements, requests corev1.ResourceList, failures *Failures) (best, bestShort offeringChoice) {
	for _, it := range types {
		if _, conflict := reqs.FirstConflict(it.Requirements); conflict || !it.Fits(requests) {
			continue
		}
		for _, o := range it.Offerings {
			if !o.Available || !o.CompatibleWith(reqs) {
				continue
			}
			c := offeringChoice{it: it, o: o}
			if failures.short(it.Name, o.Zone(), o.CapacityType(), false) {
				if c.cheaper(bestShort) {
					bestShort = c
				}
			} else if c.cheaper(best) {
				best = c
			}
		}
	}
	return best, bestShort
}
