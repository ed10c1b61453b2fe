package scheduling

import corev1 "k8s.io/api/core/v1"

// extendedNeeds is what a placement needs of each extended resource (GPUs and the like): what is
// used plus what is added, gathered once so that checking it against many options looks up maps
// instead of iterating them. Almost every pod needs none, and then it holds nothing.
type extendedNeeds struct {
	inline [2]extendedNeed
	more   []extendedNeed
	n      int
}

type extendedNeed struct {
	name   corev1.ResourceName
	amount int64
}

// needsOf gathers what used plus add request of extended resources.
func needsOf(used, add *vec) extendedNeeds {
	var e extendedNeeds
	for name, n := range used.extended {
		e.add(name, n+add.extended[name])
	}
	for name, n := range add.extended {
		if _, counted := used.extended[name]; !counted {
			e.add(name, n)
		}
	}
	return e
}

func (e *extendedNeeds) add(name corev1.ResourceName, amount int64) {
	if e.n < len(e.inline) {
		e.inline[e.n] = extendedNeed{name, amount}
	} else {
		e.more = append(e.more, extendedNeed{name, amount})
	}
	e.n++
}

// none reports whether nothing extended is needed.
func (e *extendedNeeds) none() bool { return e.n == 0 }

// fitIn reports whether alloc has what is needed, as fitsSum checks extended resources.
func (e *extendedNeeds) fitIn(alloc *vec) bool {
	for i := range min(e.n, len(e.inline)) {
		if e.inline[i].amount > alloc.extended[e.inline[i].name] {
			return false
		}
	}
	for _, need := range e.more {
		if need.amount > alloc.extended[need.name] {
			return false
		}
	}
	return true
}
