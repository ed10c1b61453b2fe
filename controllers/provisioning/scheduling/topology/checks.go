// The checks of one topology group against one placement, each a pure function of the group's
// counts: the solver's topology checks are lists of these.

package topology

import "fmt"

// OwnRefuses reports whether group g, declared by the pod, refuses a domain d holding n of the
// pods it selects; self says whether the pod is one of them. d is HostnameKey for the node
// itself, where a spread's skew is measured from zero.
func (g *Group) OwnRefuses(d, n int32, self bool) bool {
	switch g.Kind {
	case Spread:
		if d >= 0 && g.Eligible != nil && !g.Eligible[d] {
			return true
		}
		if self {
			n++
		}
		floor := int32(0)
		if d >= 0 {
			floor = g.MinCount(-1, 0)
		}
		return n-floor > g.MaxSkew
	case Affinity:
		return n == 0 && !(g.Total == 0 && self)
	}
	return n > 0
}

// NodeRefusal is the reason OwnRefuses refused the node, which holds n of the selected pods.
func (g *Group) NodeRefusal(n int32, self bool) string {
	switch g.Kind {
	case Spread:
		if self {
			n++
		}
		return fmt.Sprintf("%s would reach skew %d on the node", g.Describe(), n)
	case Affinity:
		return g.Describe() + ": no selected pod on the node"
	}
	return g.Describe() + ": a selected pod is already on the node"
}

// OthersRefuseNode reports whether group g, declared by a pod on a node that holds n of the pods g
// selects, refuses one more of them there; keepSpread says whether the pod still keeps the
// spreads of others.
func (g *Group) OthersRefuseNode(n int32, keepSpread bool) bool {
	switch g.Kind {
	case Spread:
		return keepSpread && n+1 > g.MaxSkew
	case AntiAffinity:
		return true
	}
	return false
}

// OthersRefuseDomain reports whether group g, declared by placed pods, refuses one more pod it
// selects in domain d; keepSpread says whether the pod still keeps the spreads of others. A spread
// is kept balanced everywhere, not only where its owners are, so that an owner placed later always
// finds a domain at the minimum.
func (g *Group) OthersRefuseDomain(d int32, keepSpread bool) bool {
	switch g.Kind {
	case Spread:
		return g.Hard && keepSpread && g.Counts[d]+1-g.MinCount(d, 1) > g.MaxSkew
	case AntiAffinity:
		return g.Owners[d] > 0
	}
	return false
}
