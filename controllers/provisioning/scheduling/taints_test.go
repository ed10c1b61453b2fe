package scheduling

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

func TestTolerates(t *testing.T) {
	gpu := corev1.Taint{Key: "nvidia.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	tests := []struct {
		name string
		tol  []corev1.Toleration
		want bool
	}{
		{"none", nil, false},
		{"equal key and value", []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpEqual, Value: "true"}}, true},
		{"empty operator means Equal", []corev1.Toleration{{Key: "nvidia.com/gpu", Value: "true"}}, true},
		{"wrong value", []corev1.Toleration{{Key: "nvidia.com/gpu", Value: "false"}}, false},
		{"exists on key", []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists}}, true},
		{"exists on everything", []corev1.Toleration{{Operator: corev1.TolerationOpExists}}, true},
		{"other effect", []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}, false},
		{"same effect", []corev1.Toleration{{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}, true},
		{"empty key with Equal matches nothing", []corev1.Toleration{{Operator: corev1.TolerationOpEqual}}, false},
	}
	for _, tt := range tests {
		if got := tolerates(tt.tol, &gpu); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestNodePoolTaints(t *testing.T) {
	gpu := corev1.Taint{Key: "nvidia.com/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	prefer := corev1.Taint{Key: "spot", Effect: corev1.TaintEffectPreferNoSchedule}
	startup := corev1.Taint{Key: "node.cilium.io/agent-not-ready", Effect: corev1.TaintEffectNoExecute}
	tolerateGPU := withTolerations(corev1.Toleration{Key: "nvidia.com/gpu", Operator: corev1.TolerationOpExists})
	tests := []struct {
		name  string
		pools []NodePool
		pod   *corev1.Pod
		want  string // NodePool used, or the error substring after "error: "
	}{
		{"untolerated taint rules the NodePool out",
			[]NodePool{pool(newNodePool("gpu", poolTaints(gpu)))}, newPod("p", "1", "1Gi"),
			`error: pod default/p cannot be placed: NodePool "gpu" ruled out: taint nvidia.com/gpu=true:NoSchedule not tolerated`},
		{"tolerated taint", []NodePool{pool(newNodePool("gpu", poolTaints(gpu)))}, newPod("p", "1", "1Gi", tolerateGPU), "gpu"},
		{"startup taints need no toleration", []NodePool{pool(newNodePool("cilium", poolStartupTaints(startup)))}, newPod("p", "1", "1Gi"), "cilium"},
		{"tainted higher-weight NodePool is skipped",
			[]NodePool{pool(newNodePool("gpu", poolTaints(gpu), poolWeight(50))), pool(newNodePool("general"))}, newPod("p", "1", "1Gi"), "general"},
		{"PreferNoSchedule avoided while another NodePool fits",
			[]NodePool{pool(newNodePool("spot", poolTaints(prefer), poolWeight(50))), pool(newNodePool("general"))}, newPod("p", "1", "1Gi"), "general"},
		{"PreferNoSchedule accepted when nothing else fits",
			[]NodePool{pool(newNodePool("spot", poolTaints(prefer)))}, newPod("p", "1", "1Gi"), "spot"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := solve(t, Input{Pods: []*corev1.Pod{tt.pod}, NodePools: tt.pools})
			if msg := errorOf(r, "p"); msg != "" {
				if !strings.HasPrefix("error: "+msg, tt.want) {
					t.Fatalf("got error %q, want %q", msg, tt.want)
				}
				return
			}
			if got := planOf(t, r, "p").NodePool.Name; got != tt.want {
				t.Fatalf("placed from NodePool %q, want %q", got, tt.want)
			}
		})
	}
}

func TestDaemonSetOverhead(t *testing.T) {
	gpu := corev1.Taint{Key: "nvidia.com/gpu", Effect: corev1.TaintEffectNoSchedule}
	ds := func(name, cpu string, opts ...podOption) *corev1.Pod { return newPod(name, cpu, "100Mi", opts...) }
	tests := []struct {
		name    string
		pool    NodePool
		daemons []*corev1.Pod
		wantCPU string // requests of the NodeClaim
	}{
		{"no daemonsets", pool(newNodePool("default")), nil, "500m"},
		{"daemonsets add to every new node", pool(newNodePool("default")), []*corev1.Pod{ds("logs", "200m"), ds("metrics", "100m")}, "800m"},
		{"daemonset that does not tolerate the taint does not run",
			pool(newNodePool("default", poolTaints(gpu))),
			[]*corev1.Pod{ds("logs", "200m"), ds("gpu-plugin", "100m", withTolerations(corev1.Toleration{Operator: corev1.TolerationOpExists}))}, "600m"},
		{"daemonset selecting other nodes does not run", pool(newNodePool("default")),
			[]*corev1.Pod{ds("arm-only", "300m", withNodeSelector("kubernetes.io/arch", "arm64")), ds("logs", "200m")}, "700m"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := newPod("p", "500m", "512Mi", withTolerations(corev1.Toleration{Operator: corev1.TolerationOpExists}))
			r := solve(t, Input{Pods: []*corev1.Pod{p}, NodePools: []NodePool{tt.pool}, DaemonSetPods: tt.daemons})
			nc := planOf(t, r, "p")
			want := resource.MustParse(tt.wantCPU)
			if got := nc.Requests[corev1.ResourceCPU]; got.Cmp(want) != 0 {
				t.Errorf("requests cpu %s, want %s", got.String(), want.String())
			}
			if got, want := nc.Requests[corev1.ResourcePods], int64(1+len(tt.daemons)); got.Value() > want || got.Value() < 1 {
				t.Errorf("requests pods %s", got.String())
			}
		})
	}
}

func TestDaemonSetOverheadCanExceedSmallTypes(t *testing.T) {
	// 900m of daemons leave no room on fake-it-0 (900m allocatable), so a 100m pod needs fake-it-1.
	p := newPod("p", "100m", "100Mi")
	r := solve(t, Input{Pods: []*corev1.Pod{p}, NodePools: []NodePool{pool(newNodePool("default"))}, DaemonSetPods: []*corev1.Pod{newPod("ds", "900m", "100Mi")}})
	if got := cheapest(planOf(t, r, "p")); got != "fake-it-1" {
		t.Fatalf("cheapest option %s, want fake-it-1", got)
	}
}

func TestHostPorts(t *testing.T) {
	tests := []struct {
		name  string
		pods  []*corev1.Pod
		nodes int
	}{
		{"same host port needs two nodes", []*corev1.Pod{newPod("a", "100m", "100Mi", withHostPort(8080)), newPod("b", "100m", "100Mi", withHostPort(8080))}, 2},
		{"different host ports share a node", []*corev1.Pod{newPod("a", "100m", "100Mi", withHostPort(8080)), newPod("b", "100m", "100Mi", withHostPort(8081))}, 1},
		{"no host port shares a node", []*corev1.Pod{newPod("a", "100m", "100Mi", withHostPort(8080)), newPod("b", "100m", "100Mi")}, 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := solve(t, Input{Pods: tt.pods, NodePools: []NodePool{pool(newNodePool("default"))}})
			if len(r.NewNodeClaims) != tt.nodes || len(r.PodErrors) != 0 {
				t.Fatalf("got %d NodeClaims, want %d: %v", len(r.NewNodeClaims), tt.nodes, outcome(r))
			}
		})
	}
}
