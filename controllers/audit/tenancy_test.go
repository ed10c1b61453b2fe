package audit_test

import (
	"context"
	"maps"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/tenancy"
)

func boundNamespace(name, pools string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels:      map[string]string{tenancy.BoundLabel: tenancy.BoundLabelValue},
		Annotations: map[string]string{tenancy.NodePoolsAnnotation: pools}}}
}

func taintedNodePool(name, team string) *karpv1.NodePool {
	np := nodePool(name, nil)
	np.Spec.Template.Spec.Taints = []karpv1.Taint{{Key: "team", Value: team, Effect: corev1.TaintEffectNoSchedule}}
	return np
}

func nodeOf(name, pool string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{karpv1.NodePoolLabelKey: pool}}}
}

// tenantPod returns a pod with UID "uid-<namespace>-<name>", changed by mutate.
func tenantPod(ns, name string, mutate func(*corev1.Pod)) *corev1.Pod {
	p := pod(ns, name, nil)
	p.UID = types.UID("uid-" + ns + "-" + name)
	if mutate != nil {
		mutate(p)
	}
	return p
}

func selects(pool string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{karpv1.NodePoolLabelKey: pool} }
}

func onNode(node string) func(*corev1.Pod) {
	return func(p *corev1.Pod) { p.Spec.NodeName = node }
}

func both(fs ...func(*corev1.Pod)) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		for _, f := range fs {
			f(p)
		}
	}
}

func toleratesTeam(team string) func(*corev1.Pod) {
	return func(p *corev1.Pod) {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "team", Operator: corev1.TolerationOpEqual, Value: team, Effect: corev1.TaintEffectNoSchedule})
	}
}

// tenancyCluster: team-a is bound to NodePool team-a; team-b's NodePool and node-b belong to the other
// tenant; default is not bound.
func tenancyCluster(pods ...client.Object) []client.Object {
	return append([]client.Object{
		boundNamespace("team-a", "team-a"), namespace("default", nil),
		taintedNodePool("team-a", "a"), taintedNodePool("team-b", "b"),
		nodeOf("node-a", "team-a"), nodeOf("node-b", "team-b"), &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "unmanaged"}},
	}, pods...)
}

// TestAuditTenancy runs the audit over Pods that got past the fail-open Pod webhooks: it reports each
// violation of the built-in tenancy rule in joiner_audit_violations (policy joiner.dev/pod-tenancy),
// with an Event on the Pod and a count on its Namespace, beside the ProvisioningPolicies' results.
func TestAuditTenancy(t *testing.T) {
	const (
		selectorB  = `Warning TenancyViolation audit: the pod breaks the NodePool tenancy of namespace "team-a" (bound to team-a): spec.nodeSelector[karpenter.sh/nodepool]: NodePool team-b is not bound to namespace "team-a" (bound: team-a); use only the bound NodePools`
		tolerateB  = `spec.tolerations[0]: tolerates team=b:NoSchedule, a taint only NodePool "team-b" carries, which is not bound to namespace "team-a"; remove the toleration`
		placementB = `Warning TenancyViolation audit: the pod breaks the NodePool tenancy of namespace "team-a" (bound to team-a): spec.nodeName: runs on node "node-b" of NodePool "team-b", which is not bound to namespace "team-a" (bound: team-a); delete the pod so that it is recreated on a bound NodePool`
	)
	tests := []struct {
		name       string
		objects    []client.Object
		wantGauges map[string]float64
		wantEvents []string
	}{
		{
			name:       "no bound namespace: no tenancy gauge",
			objects:    []client.Object{namespace("default", nil), pod("default", "free", map[string]string{karpv1.NodePoolLabelKey: "team-b"})},
			wantGauges: map[string]float64{},
		},
		{
			name: "compliant pods: the gauge says 0",
			objects: tenancyCluster(
				tenantPod("team-a", "own", both(selects("team-a"), toleratesTeam("a"), onNode("node-a"))),
				tenantPod("team-a", "unmanaged-node", onNode("unmanaged")),
				tenantPod("default", "free", both(selects("team-b"), toleratesTeam("b"), onNode("node-b")))),
			wantGauges: map[string]float64{"joiner.dev/pod-tenancy/Deny": 0},
		},
		{
			name: "selection, toleration and placement reported; terminal pods ignored",
			objects: tenancyCluster(
				tenantPod("team-a", "steal", both(selects("team-b"), toleratesTeam("b"))),
				tenantPod("team-a", "placed", onNode("node-b")),
				tenantPod("team-a", "done", both(selects("team-b"), func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }))),
			wantGauges: map[string]float64{"joiner.dev/pod-tenancy/Deny": 3},
			wantEvents: []string{
				placementB,
				selectorB + "; " + tolerateB,
				"Warning TenancyViolations audit found 3 violation(s) of this namespace's NodePool tenancy (was 0)",
			},
		},
		{
			name: "beside a ProvisioningPolicy's own gauge",
			objects: append(tenancyCluster(tenantPod("team-a", "steal", selects("team-b"))),
				provisioningPolicy("pods-need-selector", v1alpha1.EnforcementWarn, []string{"Pod"}, regoNodeSelector)),
			wantGauges: map[string]float64{"joiner.dev/pod-tenancy/Deny": 1, "pods-need-selector/Warn": 0},
			wantEvents: []string{
				selectorB,
				"Warning TenancyViolations audit found 1 violation(s) of this namespace's NodePool tenancy (was 0)",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var policies []*v1alpha1.ProvisioningPolicy
			var objects []client.Object
			for _, o := range tc.objects {
				if pp, ok := o.(*v1alpha1.ProvisioningPolicy); ok {
					policies = append(policies, pp)
				} else {
					objects = append(objects, o)
				}
			}
			f := newFixture(t, policies, objects)
			if err := f.auditor.RunOnce(context.Background()); err != nil {
				t.Fatalf("RunOnce: %v", err)
			}
			if got := f.violationGauges(t); !maps.Equal(got, tc.wantGauges) {
				t.Errorf("joiner_audit_violations\n got %v\nwant %v", got, tc.wantGauges)
			}
			want := slices.Sorted(slices.Values(tc.wantEvents))
			if got := f.events(); !slices.Equal(got, want) {
				t.Errorf("events\n got %q\nwant %q", got, want)
			}
		})
	}
}

// TestAuditTenancyRerun runs the audit as the cluster changes: a Pod is reported once, not on every
// run; the Namespace's Event follows its count; the gauge follows the violations.
func TestAuditTenancyRerun(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, nil, tenancyCluster(
		tenantPod("team-a", "steal", selects("team-b")),
		tenantPod("team-a", "placed", onNode("node-b"))))
	steps := []struct {
		name       string
		change     func(t *testing.T)
		wantGauge  float64
		wantEvents []string
	}{
		{name: "first run", wantGauge: 2, wantEvents: []string{
			`Warning TenancyViolation audit: the pod breaks the NodePool tenancy of namespace "team-a" (bound to team-a): spec.nodeName: runs on node "node-b" of NodePool "team-b", which is not bound to namespace "team-a" (bound: team-a); delete the pod so that it is recreated on a bound NodePool`,
			`Warning TenancyViolation audit: the pod breaks the NodePool tenancy of namespace "team-a" (bound to team-a): spec.nodeSelector[karpenter.sh/nodepool]: NodePool team-b is not bound to namespace "team-a" (bound: team-a); use only the bound NodePools`,
			"Warning TenancyViolations audit found 2 violation(s) of this namespace's NodePool tenancy (was 0)",
		}},
		{name: "nothing changes: no Events", wantGauge: 2},
		{name: "a violating pod is deleted", wantGauge: 1,
			change: func(t *testing.T) {
				if err := f.client.Delete(ctx, tenantPod("team-a", "placed", nil)); err != nil {
					t.Fatal(err)
				}
			},
			wantEvents: []string{"Warning TenancyViolations audit found 1 violation(s) of this namespace's NodePool tenancy (was 2)"}},
		{name: "the namespace is bound to team-b too", wantGauge: 0,
			change: func(t *testing.T) {
				ns := &corev1.Namespace{}
				if err := f.client.Get(ctx, client.ObjectKey{Name: "team-a"}, ns); err != nil {
					t.Fatal(err)
				}
				ns.Annotations[tenancy.NodePoolsAnnotation] = "team-a,team-b"
				if err := f.client.Update(ctx, ns); err != nil {
					t.Fatal(err)
				}
			},
			wantEvents: []string{"Normal TenancyViolations audit found 0 violation(s) of this namespace's NodePool tenancy (was 1)"}},
	}
	for _, step := range steps {
		if step.change != nil {
			step.change(t)
		}
		f.clock.Step(time.Minute)
		if err := f.auditor.RunOnce(ctx); err != nil {
			t.Fatalf("step %q: RunOnce: %v", step.name, err)
		}
		if got := f.violationGauges(t)["joiner.dev/pod-tenancy/Deny"]; got != step.wantGauge {
			t.Errorf("step %q: tenancy gauge %v, want %v", step.name, got, step.wantGauge)
		}
		if got := f.events(); !slices.Equal(got, step.wantEvents) {
			t.Errorf("step %q: events\n got %q\nwant %q", step.name, got, step.wantEvents)
		}
	}
}
