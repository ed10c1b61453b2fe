package scheduling

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/requirements"
)

func TestRefusingTaint(t *testing.T) {
	hard := corev1.Taint{Key: "dedicated", Value: "gpu", Effect: corev1.TaintEffectNoSchedule}
	soft := corev1.Taint{Key: "spot", Value: "true", Effect: corev1.TaintEffectPreferNoSchedule}
	tolerateHard := []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpExists}}
	tests := []struct {
		name      string
		tol       []corev1.Toleration
		taints    []corev1.Taint
		avoidSoft bool
		want      string // "" when no taint refuses
	}{
		{"no taints", nil, nil, true, ""},
		{"hard not tolerated", nil, []corev1.Taint{hard}, false, "taint dedicated=gpu:NoSchedule not tolerated"},
		{"hard tolerated", tolerateHard, []corev1.Taint{hard}, true, ""},
		{"soft avoided", nil, []corev1.Taint{soft}, true, "PreferNoSchedule taint spot=true:PreferNoSchedule avoided while preferences are respected"},
		{"soft accepted once preferences are dropped", nil, []corev1.Taint{soft}, false, ""},
		{"hard before soft", nil, []corev1.Taint{soft, hard}, true, "taint dedicated=gpu:NoSchedule not tolerated"},
		{"soft after a tolerated hard", tolerateHard, []corev1.Taint{hard, soft}, true, "PreferNoSchedule taint spot=true:PreferNoSchedule avoided while preferences are respected"},
	}
	for _, tt := range tests {
		got := ""
		if taint := refusingTaint(tt.tol, tt.taints, tt.avoidSoft); taint != nil {
			got = taintRefusal(taint)
		}
		if got != tt.want {
			t.Errorf("%s: got %q, want %q", tt.name, got, tt.want)
		}
	}
}

func TestConflictingPort(t *testing.T) {
	tcp := func(ip string, port int32) hostPort {
		return hostPort{ip: ip, protocol: corev1.ProtocolTCP, port: port}
	}
	tests := []struct {
		name      string
		want      []hostPort
		used      []hostPort
		conflicts bool
		port      int32
	}{
		{"nothing used", []hostPort{tcp("", 80)}, nil, false, 0},
		{"other port", []hostPort{tcp("", 80)}, []hostPort{tcp("", 443)}, false, 0},
		{"same port, wildcard", []hostPort{tcp("", 80)}, []hostPort{tcp("10.0.0.1", 80)}, true, 80},
		{"same port, other addresses", []hostPort{tcp("10.0.0.2", 80)}, []hostPort{tcp("10.0.0.1", 80)}, false, 0},
		{"same port, other protocol", []hostPort{{protocol: corev1.ProtocolUDP, port: 80}}, []hostPort{tcp("", 80)}, false, 0},
		{"first conflict wins", []hostPort{tcp("", 8080), tcp("", 80), tcp("", 443)}, []hostPort{tcp("", 443), tcp("", 80)}, true, 80},
	}
	for _, tt := range tests {
		got, conflicts := conflictingPort(tt.want, tt.used)
		if conflicts != tt.conflicts || got.port != tt.port {
			t.Errorf("%s: got %d, %v; want %d, %v", tt.name, got.port, conflicts, tt.port, tt.conflicts)
		}
	}
}

func TestFitsNodeRequirements(t *testing.T) {
	zoneA := requirements.New(requirements.In("zone", "a"))
	zoneB := requirements.New(requirements.In("zone", "b"))
	hostX := requirements.New(requirements.In(karpv1.LabelHostname, "x"))
	existing := &bin{existing: &ExistingNode{}, reqs: requirements.FromLabels(map[string]string{"zone": "b", karpv1.LabelHostname: "x"})}
	planned := &bin{tmpl: &template{}, hostname: "claim-1", reqs: requirements.New(requirements.In("zone", "a", "b"))}
	tests := []struct {
		name   string
		b      *bin
		terms  []requirements.Requirements
		term   int
		reason string
	}{
		{"existing, first term", existing, []requirements.Requirements{zoneB}, 0, ""},
		{"existing, second term", existing, []requirements.Requirements{zoneA, zoneB}, 1, ""},
		{"existing, no term; the first conflict is named", existing, []requirements.Requirements{zoneA}, -1, "zone"},
		{"existing, hostname matches", existing, []requirements.Requirements{hostX}, 0, ""},
		{"planned, zone allowed", planned, []requirements.Requirements{zoneA}, 0, ""},
		{"planned, other hostname", planned, []requirements.Requirements{hostX}, -1, karpv1.LabelHostname},
	}
	for _, tt := range tests {
		q := &podInfo{active: tt.terms}
		for _, r := range tt.terms {
			q.activeNoHost = append(q.activeNoHost, withoutHostname(r))
		}
		var refusal refusalReason
		term, ok := fitsNodeRequirements(q, tt.b, &refusal)
		if term != tt.term || ok != (tt.term >= 0) {
			t.Errorf("%s: got term %d, %v; want %d", tt.name, term, ok, tt.term)
		}
		if tt.reason == "" && refusal.reason != "" || !strings.Contains(refusal.reason, tt.reason) {
			t.Errorf("%s: reason %q, want one naming %q", tt.name, refusal.reason, tt.reason)
		}
	}
}

func TestComparePrice(t *testing.T) {
	tests := []struct {
		a, b float64
		want int
	}{
		{1, 2, -1},
		{2, 1, 1},
		{1, 1, 0},
		{1, 1 + priceEpsilon/2, 0},
		{1, 1 + 2*priceEpsilon, -1},
	}
	for _, tt := range tests {
		if got := comparePrice(tt.a, tt.b); got != tt.want {
			t.Errorf("comparePrice(%v, %v) = %d, want %d", tt.a, tt.b, got, tt.want)
		}
	}
}
