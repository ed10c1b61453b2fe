package resources

import corev1 "k8s.io/api/core/v1"

// ExtendedNeeds is what a placement needs of each extended resource (GPUs and the like): what is
// used plus what is added, gathered once so that checking it against many options looks up maps
// instead of iterating them. Almost every pod needs none, and then it holds nothing.
type ExtendedNeeds struct {
	inline [2]extendedNeed
	more   []extendedNeed
	n      int
}

type extendedNeed struct {
	name   corev1.ResourceName
	amount int64
}

// NeedsOf gathers what used plus add request of extended resources.
func NeedsOf(used, add *Vec) ExtendedNeeds {
	var e ExtendedNeeds
	for name, n := range used.Extended {
		e.add(name, n+add.Extended[name])
	}
	for name, n := range add.Extended {
		if _, counted := used.Extended[name]; !counted {
			e.add(name, n)
		}
	}
	return e
}

func (e *ExtendedNeeds) add(name corev1.ResourceName, amount int64) {
	if e.n < len(e.inline) {
		e.inline[e.n] = extendedNeed{name, amount}
	} else {
		e.more = append(e.more, extendedNeed{name, amount})
	}
	e.n++
}

// None reports whether nothing extended is needed.
func (e *ExtendedNeeds) None() bool { return e.n == 0 }

// FitIn reports whether alloc has what is needed, as FitsSum checks extended resources.
func (e *ExtendedNeeds) FitIn(alloc *Vec) bool {
	for i := range min(e.n, len(e.inline)) {
		if e.inline[i].amount > alloc.Extended[e.inline[i].name] {
			return false
		}
	}
	for _, need := range e.more {
		if need.amount > alloc.Extended[need.name] {
			return false
		}
	}
	return true
}
