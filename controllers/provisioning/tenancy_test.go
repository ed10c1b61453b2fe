package provisioning

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/joiner-dev/joiner/testsupport/eventstest"

	"github.com/go-logr/logr"
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

// provisionRound runs one provisioning round over a fake API server holding objects, and returns
// "pod -> NodePool" for every pod nominated to a new NodeClaim, the NodePools of the NodeClaims
// created, and the Events recorded.
func provisionRound(t *testing.T, objects []client.Object, funcs *interceptor.Funcs) (nominated map[string]string, claims []string, recorded []string) {
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
	p, err := New(c, fake.New(fake.InstanceTypes(4)...), recorder, clocktesting.NewFakeClock(testNow), logr.Discard(), nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Provision(context.Background()); err != nil {
		t.Fatalf("Provision: %v", err)
	}
	list := &karpv1.NodeClaimList{}
	if err := c.List(context.Background(), list); err != nil {
		t.Fatal(err)
	}
	for _, nc := range list.Items {
		claims = append(claims, nc.Labels[karpv1.NodePoolLabelKey])
	}
	slices.Sort(claims)
	nominated = map[string]string{}
	p.mu.Lock()
	for uid, n := range p.nominated {
		for _, nc := range list.Items {
			if nc.Name == n.nodeClaim {
				nominated[strings.TrimPrefix(string(uid), "uid-")] = nc.Labels[karpv1.NodePoolLabelKey]
			}
		}
	}
	p.mu.Unlock()
	recorded = append(recorded, eventstest.Drain(recorder)...)
	return nominated, claims, recorded
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
			name: "a namespace that cannot be read: its pods wait, the others are provisioned",
			objects: append(pools(),
				podObject("unknown", inNamespace("team-a"), tolerating("a")),
				podObject("free")),
			funcs: &interceptor.Funcs{Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
				if _, ok := obj.(*corev1.Namespace); ok && key.Name == "team-a" {
					return errors.New("connection refused")
				}
				return c.Get(ctx, key, obj, opts...)
			}},
			wantNominated: map[string]string{"free": "shared"},
			wantClaims:    []string{"shared"},
			notEvents:     []string{"TenancyViolation", "FailedProvisioning"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			nominated, claims, recorded := provisionRound(t, tc.objects, tc.funcs)
			if !maps.Equal(nominated, tc.wantNominated) {
				t.Errorf("nominated %v, want %v", nominated, tc.wantNominated)
			}
			if !slices.Equal(claims, tc.wantClaims) {
				t.Errorf("NodeClaims of NodePools %q, want %q", claims, tc.wantClaims)
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

func TestExcludeNodePools(t *testing.T) {
	notIn := corev1.NodeSelectorRequirement{Key: karpv1.NodePoolLabelKey, Operator: corev1.NodeSelectorOpNotIn, Values: []string{"team-b", "team-c"}}
	zone := corev1.NodeSelectorRequirement{Key: corev1.LabelTopologyZone, Operator: corev1.NodeSelectorOpIn, Values: []string{"z1"}}
	withRequired := func(terms ...corev1.NodeSelectorTerm) fixtures.PodOption {
		return func(p *corev1.Pod) {
			p.Spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
				RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{NodeSelectorTerms: terms}}}
		}
	}
	tests := []struct {
		name string
		pod  corev1.Pod
		want []corev1.NodeSelectorTerm
	}{
		{name: "no affinity: one term", pod: fixtures.Pod("p"),
			want: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{notIn}}}},
		{name: "added to every term with expressions, not to empty ones",
			pod: fixtures.Pod("p", withRequired(
				corev1.NodeSelectorTerm{MatchExpressions: []corev1.NodeSelectorRequirement{zone}},
				corev1.NodeSelectorTerm{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n"}}}},
			)),
			want: []corev1.NodeSelectorTerm{
				{MatchExpressions: []corev1.NodeSelectorRequirement{zone, notIn}},
				{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"n"}}}},
			}},
		{name: "required affinity without terms matches nothing and stays so", pod: fixtures.Pod("p", withRequired()), want: nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			orig := tc.pod.DeepCopy()
			got := excludeNodePools(&tc.pod, []string{"team-b", "team-c"})
			if !reflect.DeepEqual(&tc.pod, orig) {
				t.Error("excludeNodePools changed the pod it was given")
			}
			terms := got.Spec.Affinity.NodeAffinity.RequiredDuringSchedulingIgnoredDuringExecution.NodeSelectorTerms
			if !reflect.DeepEqual(terms, tc.want) {
				t.Errorf("terms\n got %+v\nwant %+v", terms, tc.want)
			}
		})
	}
}
