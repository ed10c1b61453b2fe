package scheduling

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling/resources"
)

// TestLimitsAllows is the table of the NodePool-limits check behind fitsLimits: opening a
// NodeClaim (newClaims 1) or growing one (before -> after) against what is left of each limit,
// after what the simulation has already reserved.
func TestLimitsAllows(t *testing.T) {
	rl := func(kv ...string) corev1.ResourceList {
		out := corev1.ResourceList{}
		for i := 0; i < len(kv); i += 2 {
			out[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
		}
		return out
	}
	tests := []struct {
		name          string
		remaining     corev1.ResourceList
		reserved      corev1.ResourceList
		claims        int64
		before, after corev1.ResourceList
		newClaims     int64
		want          bool
		wantWhich     string
	}{
		{name: "no limits", remaining: rl(), after: rl("cpu", "64"), newClaims: 1, want: true},
		{name: "cpu fits exactly", remaining: rl("cpu", "8"), after: rl("cpu", "8"), newClaims: 1, want: true},
		{name: "cpu exceeded", remaining: rl("cpu", "8"), after: rl("cpu", "16"), newClaims: 1, wantWhich: "cpu"},
		{name: "reserved counts", remaining: rl("cpu", "8"), reserved: rl("cpu", "4"), after: rl("cpu", "8"), newClaims: 1, wantWhich: "cpu"},
		{name: "growth counts only the difference", remaining: rl("cpu", "8"), reserved: rl("cpu", "4"), before: rl("cpu", "4"), after: rl("cpu", "8"), want: true},
		{name: "memory exceeded", remaining: rl("cpu", "100", "memory", "1Gi"), after: rl("cpu", "2", "memory", "2Gi"), newClaims: 1, wantWhich: "memory"},
		{name: "extended resource exceeded", remaining: rl("nvidia.com/gpu", "1"), after: rl("nvidia.com/gpu", "2"), newClaims: 1, wantWhich: "nvidia.com/gpu"},
		{name: "unlimited resource is ignored", remaining: rl("memory", "1Gi"), after: rl("cpu", "1000", "memory", "1Gi"), newClaims: 1, want: true},
		{name: "node limit reached", remaining: rl("nodes", "2"), claims: 2, after: rl("cpu", "1"), newClaims: 1, wantWhich: "nodes (0 left)"},
		{name: "node limit does not stop growth", remaining: rl("nodes", "2"), claims: 2, before: rl("cpu", "1"), after: rl("cpu", "2"), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLimits(tt.remaining)
			l.reserved, l.claims = resources.Of(tt.reserved), tt.claims
			before, after := resources.Of(tt.before), resources.Of(tt.after)
			got, which := l.allows(&before, &after, tt.newClaims)
			if got != tt.want || which != tt.wantWhich {
				t.Errorf("allows = %v, %q; want %v, %q", got, which, tt.want, tt.wantWhich)
			}
			if l.any() != (len(tt.remaining) > 0) {
				t.Errorf("any() = %v with limits %v", l.any(), tt.remaining)
			}
		})
	}
}
