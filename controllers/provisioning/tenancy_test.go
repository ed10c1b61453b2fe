package provisioning

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/joiner-dev/joiner/testsupport/eventstest"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrlfake "sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/api/scheme"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
	"github.com/joiner-dev/joiner/tenancy"
	"github.com/joiner-dev/joiner/testsupport/fixtures"
	"github.com/joiner-dev/joiner/testsupport/metricstest"
)

// inNamespace moves the pod to the namespace.
func inNamespace(ns string) fixtures.PodOption {
	return func(p *corev1.Pod) { p.Namespace = ns }
}

// selecting sets nodeSelector karpenter.sh/nodepool.
func selecting(pool string) fixtures.PodOption {
	return func(p *corev1.Pod) { p.Spec.NodeSelector = map[string]string{karpv1.NodePoolLabelKey: pool} }
}

// tolerating tolerates the taint tenant=<value>:NoSchedule.
func tolerating(value string) fixtures.PodOption {
	return func(p *corev1.Pod) {
		p.Spec.Tolerations = append(p.Spec.Tolerations, corev1.Toleration{Key: "tenant", Operator: corev1.TolerationOpEqual, Value: value, Effect: corev1.TaintEffectNoSchedule})
	}
}

// poolTaint taints the NodePool's nodes with tenant=<value>:NoSchedule.
func poolTaint(value string) fixtures.PoolOption {
	return func(np *karpv1.NodePool) {
		np.Spec.Template.Spec.Taints = append(np.Spec.Template.Spec.Taints, karpv1.Taint{Key: "tenant", Value: value, Effect: corev1.TaintEffectNoSchedule})
	}
}

// poolWeight sets spec.weight: the simulation tries heavier NodePools first.
func poolWeight(w int32) fixtures.PoolOption {
	return func(np *karpv1.NodePool) { np.Spec.Weight = ptr.To(w) }
}

func boundNamespace(name string, pools ...string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels:      map[string]string{tenancy.BoundLabel: tenancy.BoundLabelValue},
		Annotations: map[string]string{tenancy.NodePoolsAnnotation: strings.Join(pools, ",")}}}
}

// round is what one provisioning round over a fake API server did.
type round struct {
	// nominated maps "pod -> NodePool" for every pod nominated to a new NodeClaim.
	nominated map[string]string
	// claims are the NodePools of the NodeClaims created, sorted.
	claims []string
	// recorded are the Events recorded.
	recorded []string
	// err is what Provision returned.
	err error
	// refused is joiner_tenancy_refused_nodeclaims_total of the provisioner.
	refused float64
}

// provisionRound runs one provisioning round over a fake API server holding objects, fails the
// test when it returns an error, and returns "pod -> NodePool" for every pod nominated to a new
// NodeClaim, the NodePools of the NodeClaims created, and the Events recorded.
func provisionRound(t *testing.T, objects []client.Object, funcs *interceptor.Funcs) (nominated map[string]string, claims []string, recorded []string) {
	t.Helper()
	r := runRound(t, objects, funcs)
	if r.err != nil {
		t.Fatalf("Provision: %v", r.err)
	}
	return r.nominated, r.claims, r.recorded
}

// runRound runs one provisioning round over a fake API server holding objects, its calls passed
// through funcs when not nil.
func runRound(t *testing.T, objects []client.Object, funcs *interceptor.Funcs) round {
	t.Helper()
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	builder := ctrlfake.NewClientBuilder().WithScheme(s).WithObjects(objects...)
	if funcs != nil {
		builder = builder.WithInterceptorFuncs(*funcs)
	}
	c := builder.Build()
	recorder := events.NewFakeRecorder(100)
	reg := prometheus.NewRegistry()
	p, err := New(c, fake.New(fake.InstanceTypes(4)...), recorder, clocktesting.NewFakeClock(testNow), logr.Discard(), reg, Options{})
	if err != nil {
		t.Fatal(err)
	}
	r := round{err: p.Provision(context.Background()), nominated: map[string]string{}}
	list := &karpv1.NodeClaimList{}
	if err := c.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	for _, nc := range list.Items {
		r.claims = append(r.claims, nc.Labels[karpv1.NodePoolLabelKey])
	}
	slices.Sort(r.claims)
	p.mu.Lock()
	for uid, n := range p.nominated {
		for _, nc := range list.Items {
			if nc.Name == n.nodeClaim {
				r.nominated[strings.TrimPrefix(string(uid), "uid-")] = nc.Labels[karpv1.NodePoolLabelKey]
			}
		}
	}
	p.mu.Unlock()
	r.recorded = eventstest.Drain(recorder)
	r.refused = metricstest.Sum(t, reg, "joiner_tenancy_refused_nodeclaims_total", map[string]string{"controller": MetricsControllerName})
	return r
}

// unbindOnList makes the namespace look unbound to List (the snapshot) while Get (the gate's
// last check) still sees its binding: a namespace bound between the snapshot and the create.
func unbindOnList(name string) *interceptor.Funcs {
	return &interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
		if err := c.List(ctx, list, opts...); err != nil {
			return err
		}
		if nl, ok := list.(*corev1.NamespaceList); ok {
			for i := range nl.Items {
				if nl.Items[i].Name == name {
					delete(nl.Items[i].Annotations, tenancy.NodePoolsAnnotation)
				}
			}
		}
		return nil
	}}
}

// testNow is the fake clock's time.
var testNow = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)

// podObject returns fixtures.Pod as an object for the fake API server.
func podObject(name string, opts ...fixtures.PodOption) *corev1.Pod {
	p := fixtures.Pod(name, opts...)
	return &p
}

// nodePoolObject returns fixtures.NodePool as an object for the fake API server.
func nodePoolObject(name string, opts ...fixtures.PoolOption) *karpv1.NodePool {
	np := fixtures.NodePool(name, opts...)
	return &np
}

// TestProvisionHonoursTenancy runs provisioning rounds with pods that the fail-open Pod webhooks did
// not see: a pod of a bound namespace is only ever planned onto its namespace's NodePools, a pod that
// reaches for another tenant's NodePool gets an Event naming it, and unbound namespaces are left alone.
func TestProvisionHonoursTenancy(t *testing.T) {
	// team-b is the heavier NodePool, so that the simulation would pick it first if it were allowed.
	pools := func() []client.Object {
		return []client.Object{
			nodePoolObject("team-a", poolTaint("a")),
			nodePoolObject("team-b", poolTaint("b"), poolWeight(50)),
			nodePoolObject("shared", poolWeight(100)),
			boundNamespace("team-a", "team-a"),
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "default"}},
		}
	}
	tests := []struct {
		name          string
		objects       []client.Object
		funcs         *interceptor.Funcs
		wantNominated map[string]string
		wantClaims    []string
		// wantErr is a substring of the round's error, "" when it must succeed.
		wantErr string
		// wantRefused is the NodeClaims the gate refused.
		wantRefused float64
		// wantEvents are substrings, each of which one recorded Event must contain, in any order;
		// notEvents must be in none.
		wantEvents []string
		notEvents  []string
	}{
		{
			name: "a pod selecting and tolerating another tenant's NodePool stays pending, with an Event",
			objects: append(pools(),
				podObject("steal", inNamespace("team-a"), selecting("team-b"), tolerating("b"))),
			wantNominated: map[string]string{},
			wantEvents: []string{
				`Warning TenancyViolation no capacity is launched for this pod in NodePool team-b: namespace "team-a" is bound to team-a only: spec.nodeSelector[karpenter.sh/nodepool]: NodePool team-b is not bound to namespace "team-a" (bound: team-a); use only the bound NodePools; spec.tolerations[0]: tolerates tenant=b:NoSchedule, a taint only NodePool "team-b" carries`,
				"Warning FailedProvisioning",
			},
			notEvents: []string{"Nominated"},
		},
		{
			name: "a pod tolerating another tenant's taint lands on its own NodePool",
			objects: append(pools(),
				podObject("tolerant", inNamespace("team-a"), tolerating("a"), tolerating("b"))),
			wantNominated: map[string]string{"tolerant": "team-a"},
			wantClaims:    []string{"team-a"},
			wantEvents:    []string{"Warning TenancyViolation no capacity is launched for this pod in NodePool team-b", "Normal Nominated"},
		},
		{
			name: "a plain pod of a bound namespace is kept off untainted NodePools of others, without an Event",
			objects: append(pools(),
				podObject("plain", inNamespace("team-a"), tolerating("a"))),
			wantNominated: map[string]string{"plain": "team-a"},
			wantClaims:    []string{"team-a"},
			wantEvents:    []string{"Normal Nominated"},
			notEvents:     []string{"TenancyViolation"},
		},
		{
			name: "a pod of an unbound namespace may use any NodePool",
			objects: append(pools(),
				podObject("free", selecting("team-b"), tolerating("b")),
				podObject("orphan", inNamespace("no-such-namespace"))),
			wantNominated: map[string]string{"free": "team-b", "orphan": "shared"},
			wantClaims:    []string{"shared", "team-b"},
			notEvents:     []string{"TenancyViolation"},
		},
		{
			name: "namespaces that cannot be listed: nothing is provisioned (tenancy fails closed)",
			objects: append(pools(),
				podObject("unknown", inNamespace("team-a"), tolerating("a")),
				podObject("free")),
			funcs: &interceptor.Funcs{List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
				if _, ok := list.(*corev1.NamespaceList); ok {
					return errors.New("connection refused")
				}
				return c.List(ctx, list, opts...)
			}},
			wantErr:       "list namespaces: connection refused",
			wantNominated: map[string]string{},
			notEvents:     []string{"TenancyViolation", "FailedProvisioning", "Nominated"},
		},
		{
			name: "a namespace the gate cannot read: the NodeClaim for its pod is not created, the others are",
			objects: append(pools(),
				podObject("unknown", inNamespace("team-a"), tolerating("a")),
				podObject("free")),
			funcs: &interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*corev1.Namespace); ok && key.Name == "team-a" {
					return errors.New("connection refused")
				}
				return c.Get(ctx, key, obj, opts...)
			}},
			wantErr:       `read namespace "team-a" for its NodePool tenancy (joiner.dev/nodepools): connection refused`,
			wantNominated: map[string]string{"free": "shared"},
			wantClaims:    []string{"shared"},
			wantEvents:    []string{`Warning FailedProvisioning could not create a NodeClaim from NodePool "team-a"`},
			notEvents:     []string{"TenancyViolation"},
		},
		{
			name: "a namespace bound after the snapshot: the gate refuses the NodeClaim, with an Event on the pod",
			objects: append(pools(),
				podObject("late", inNamespace("team-a"), tolerating("a"), tolerating("b"))),
			funcs:         unbindOnList("team-a"),
			wantNominated: map[string]string{},
			wantRefused:   1,
			wantEvents:    []string{`Warning TenancyViolation refused to create a NodeClaim of NodePool shared for this pod: namespace "team-a" is bound to team-a only`},
			notEvents:     []string{"Nominated", "FailedProvisioning"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := runRound(t, tc.objects, tc.funcs)
			recorded := r.recorded
			switch {
			case tc.wantErr == "" && r.err != nil:
				t.Errorf("Provision: %v", r.err)
			case tc.wantErr != "" && (r.err == nil || !strings.Contains(r.err.Error(), tc.wantErr)):
				t.Errorf("Provision returned %v, want an error containing %q", r.err, tc.wantErr)
			}
			if !maps.Equal(r.nominated, tc.wantNominated) {
				t.Errorf("nominated %v, want %v", r.nominated, tc.wantNominated)
			}
			if !slices.Equal(r.claims, tc.wantClaims) {
				t.Errorf("NodeClaims of NodePools %q, want %q", r.claims, tc.wantClaims)
			}
			if r.refused != tc.wantRefused {
				t.Errorf("joiner_tenancy_refused_nodeclaims_total = %v, want %v", r.refused, tc.wantRefused)
			}
			for _, want := range tc.wantEvents {
				if !slices.ContainsFunc(recorded, func(e string) bool { return strings.Contains(e, want) }) {
					t.Errorf("no Event contains %q; recorded:\n%s", want, strings.Join(recorded, "\n"))
				}
			}
			for _, not := range tc.notEvents {
				if slices.ContainsFunc(recorded, func(e string) bool { return strings.Contains(e, not) }) {
					t.Errorf("an Event contains %q; recorded:\n%s", not, strings.Join(recorded, "\n"))
				}
			}
		})
	}
}

// TestProvisionSkipsInvalidNodePools checks that a NodePool whose ValidationSucceeded condition is
// False is left out of the simulation, with an Event on it naming the condition's message, even
// before its Ready condition says so; the pod goes to another NodePool if one fits.
func TestProvisionSkipsInvalidNodePools(t *testing.T) {
	invalid := fixtures.PoolCondition(karpv1.ConditionTypeValidationSucceeded, metav1.ConditionFalse, "PolicyViolation", "spec.limits.cpu exceeds the cap")
	tests := []struct {
		name          string
		pools         []client.Object
		wantNominated map[string]string
		wantEvents    []string
	}{
		{
			name:          "the invalid NodePool is skipped, the pod goes to the other",
			pools:         []client.Object{nodePoolObject("invalid", invalid, poolWeight(100)), nodePoolObject("valid")},
			wantNominated: map[string]string{"web": "valid"},
			wantEvents: []string{
				"Warning NodePoolInvalid no capacity is launched from NodePool invalid: its ValidationSucceeded condition is False (PolicyViolation): spec.limits.cpu exceeds the cap; fix its spec",
				"Normal Nominated",
			},
		},
		{
			name:          "the only NodePool is invalid: the pod stays pending",
			pools:         []client.Object{nodePoolObject("invalid", invalid, fixtures.PoolCondition(karpv1.ConditionTypeReady, metav1.ConditionTrue, "Stale", ""))},
			wantNominated: map[string]string{},
			wantEvents: []string{
				"Warning NodePoolInvalid no capacity is launched from NodePool invalid: its ValidationSucceeded condition is False (PolicyViolation): spec.limits.cpu exceeds the cap; fix its spec",
				"Warning FailedProvisioning",
			},
		},
		{
			name: "validation that succeeded, or has not run yet, counts for nothing",
			pools: []client.Object{
				nodePoolObject("checked", fixtures.PoolCondition(karpv1.ConditionTypeValidationSucceeded, metav1.ConditionTrue, "ValidationSucceeded", ""), poolWeight(10)),
				nodePoolObject("unchecked", fixtures.PoolCondition(karpv1.ConditionTypeValidationSucceeded, metav1.ConditionUnknown, "AwaitingValidation", "")),
			},
			wantNominated: map[string]string{"web": "checked"},
			wantEvents:    []string{"Normal Nominated"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nominated, _, recorded := provisionRound(t, append(tc.pools, podObject("web")), nil)
			if !maps.Equal(nominated, tc.wantNominated) {
				t.Errorf("nominated %v, want %v", nominated, tc.wantNominated)
			}
			if len(recorded) != len(tc.wantEvents) {
				t.Errorf("%d Events, want %d:\n%s", len(recorded), len(tc.wantEvents), strings.Join(recorded, "\n"))
			}
			for _, want := range tc.wantEvents {
				if !slices.ContainsFunc(recorded, func(e string) bool { return strings.HasPrefix(e, want) }) {
					t.Errorf("no Event starts with %q; recorded:\n%s", want, strings.Join(recorded, "\n"))
				}
			}
		})
	}
}
