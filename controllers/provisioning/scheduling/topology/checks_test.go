package topology

import (
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

func TestGroupOwnRefuses(t *testing.T) {
	spread := func(maxSkew int32, counts ...int32) *Group {
		return &Group{Term: Term{Kind: Spread, MaxSkew: maxSkew, Selector: labels.Everything()}, Counts: counts, Owners: make([]int32, len(counts))}
	}
	limited := spread(1, 0, 5, 5)
	limited.Eligible = []bool{false, true, true}
	tests := []struct {
		name string
		g    *Group
		d, n int32
		self bool
		want bool
	}{
		{"node spread within skew", spread(1), HostnameKey, 0, true, false},
		{"node spread over skew", spread(1), HostnameKey, 1, true, true},
		{"node spread, pod not counted", spread(1), HostnameKey, 1, false, false},
		{"domain spread at the minimum", spread(1, 2, 3), 0, 2, true, false},
		{"domain spread above the minimum", spread(1, 2, 3), 1, 3, true, true},
		{"domain spread, not eligible", limited, 0, 0, true, true},
		{"domain spread, minimum over the eligible only", limited, 1, 5, true, false},
		{"affinity, selected pod there", &Group{Term: Term{Kind: Affinity}, Total: 1}, HostnameKey, 1, false, false},
		{"affinity, none there", &Group{Term: Term{Kind: Affinity}, Total: 1}, HostnameKey, 0, false, true},
		{"affinity, the first pod that selects itself", &Group{Term: Term{Kind: Affinity}}, HostnameKey, 0, true, false},
		{"anti-affinity, none there", &Group{Term: Term{Kind: AntiAffinity}}, 0, 0, true, false},
		{"anti-affinity, one there", &Group{Term: Term{Kind: AntiAffinity}}, 0, 1, false, true},
	}
	for _, tt := range tests {
		if got := tt.g.OwnRefuses(tt.d, tt.n, tt.self); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestGroupOthersRefuse(t *testing.T) {
	tests := []struct {
		name       string
		g          *Group
		n          int32 // on the node
		d          int32 // the domain
		keepSpread bool
		node, dom  bool
	}{
		{"spread within skew", &Group{Term: Term{Kind: Spread, MaxSkew: 2}, Hard: true, Counts: []int32{1, 1}, Owners: []int32{1, 0}}, 1, 0, true, false, false},
		{"spread over skew", &Group{Term: Term{Kind: Spread, MaxSkew: 1}, Hard: true, Counts: []int32{1, 1}, Owners: []int32{1, 0}}, 1, 0, true, true, false},
		{"spread over skew in the domain", &Group{Term: Term{Kind: Spread, MaxSkew: 1}, Hard: true, Counts: []int32{2, 1}, Owners: []int32{1, 0}}, 1, 0, true, true, true},
		{"spread dropped by the pod", &Group{Term: Term{Kind: Spread, MaxSkew: 1}, Hard: true, Counts: []int32{2, 1}, Owners: []int32{1, 0}}, 1, 0, false, false, false},
		{"soft spread is not kept in domains", &Group{Term: Term{Kind: Spread, MaxSkew: 1}, Counts: []int32{2, 1}, Owners: []int32{0, 0}}, 1, 0, true, true, false},
		{"anti-affinity with an owner", &Group{Term: Term{Kind: AntiAffinity}, Counts: []int32{0, 0}, Owners: []int32{0, 1}}, 0, 1, true, true, true},
		{"anti-affinity elsewhere", &Group{Term: Term{Kind: AntiAffinity}, Counts: []int32{0, 0}, Owners: []int32{0, 1}}, 0, 0, true, true, false},
		{"affinity never refuses", &Group{Term: Term{Kind: Affinity}, Counts: []int32{0, 0}, Owners: []int32{1, 1}}, 0, 0, true, false, false},
	}
	for _, tt := range tests {
		if got := tt.g.OthersRefuseNode(tt.n, tt.keepSpread); got != tt.node {
			t.Errorf("%s: on the node got %v, want %v", tt.name, got, tt.node)
		}
		if got := tt.g.OthersRefuseDomain(tt.d, tt.keepSpread); got != tt.dom {
			t.Errorf("%s: in domain %d got %v, want %v", tt.name, tt.d, got, tt.dom)
		}
	}
}
