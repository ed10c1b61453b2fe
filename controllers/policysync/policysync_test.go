package policysync

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/joiner-dev/joiner/testsupport/eventstest"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/api/scheme"
	"github.com/joiner-dev/joiner/policy"
)

// Rego bodies of the test policies; testPolicy puts each in package t.<name>, on lines 1-2.
const (
	// regoCapWeight denies a NodePool whose weight is above the maxWeight parameter.
	regoCapWeight = `violation contains {"msg": sprintf("weight %d above %d", [w, max]), "field": "spec.weight"} if {
	w := input.review.object.spec.weight
	max := input.parameters.maxWeight
	w > max
}`
	regoDoesNotParse = `violation contains {"msg": "x"} if {
	input.review.object.spec.weight >
}`
	regoHTTPSend = `violation contains {"msg": "x"} if {
	http.send({"method": "GET", "url": "https://example.com"}).status_code != 200
}`
	regoNoViolationRule = `deny contains "x" if { true }`
	// regoInventory reasons across objects: another NodePool of the same team, and a LocalNodeClass
	// missing from data.inventory.
	regoInventory = `nodepools := object.get(data.inventory.cluster, ["karpenter.sh/v1", "NodePool"], {})

classes := object.get(data.inventory.cluster, ["joiner.dev/v1alpha1", "LocalNodeClass"], {})

violation contains {"msg": sprintf("team %s already has NodePools %v", [team, others])} if {
	team := input.review.object.metadata.labels.team
	others := sort([name | some name, np in nodepools; np.metadata.labels.team == team; name != input.review.name])
	count(others) > 0
}

violation contains {"msg": sprintf("LocalNodeClass %s is not in the inventory", [ref.name])} if {
	ref := input.review.object.spec.template.spec.nodeClassRef
	ref.kind == "LocalNodeClass"
	not classes[ref.name]
}`
)

func testScheme(t *testing.T) *runtime.Scheme {
	t.Helper()
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func newClient(t *testing.T, objects ...client.Object) client.WithWatch {
	t.Helper()
	return fake.NewClientBuilder().WithScheme(testScheme(t)).WithObjects(objects...).
		WithStatusSubresource(&v1alpha1.ProvisioningPolicy{}).Build()
}

// testPolicy returns a ProvisioningPolicy on NodePools at the given generation, with maxWeight 50.
func testPolicy(name string, generation int64, rego string) *v1alpha1.ProvisioningPolicy {
	return &v1alpha1.ProvisioningPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: generation},
		Spec: v1alpha1.ProvisioningPolicySpec{
			Rego:              fmt.Sprintf("package t.%s\n\n%s\n", strings.ReplaceAll(name, "-", "_"), rego),
			EnforcementAction: v1alpha1.EnforcementDeny,
			Match:             v1alpha1.PolicyMatch{Kinds: []string{"NodePool"}},
			Parameters:        &apiextensionsv1.JSON{Raw: []byte(`{"maxWeight": 50}`)},
		},
	}
}

// enginePolicy is p as the engine sees it, for installing an older version before a test.
func enginePolicy(p *v1alpha1.ProvisioningPolicy) policy.Policy {
	return policy.Policy{
		Name: p.Name, Generation: p.Generation, Rego: p.Spec.Rego, EnforcementAction: policy.ActionDeny,
		Match: policy.Match{Kinds: []string{"NodePool"}}, Parameters: map[string]any{"maxWeight": 50},
	}
}

func request(name string) ctrl.Request {
	return ctrl.Request{NamespacedName: types.NamespacedName{Name: name}}
}

// verdict evaluates a CREATE of obj (a NodePool as JSON) and returns the results as the webhook prints them.
func verdict(t *testing.T, e *policy.Engine, obj map[string]any) []string {
	t.Helper()
	r, err := policy.NewReview(policy.OperationCreate, obj, nil)
	if err != nil {
		t.Fatal(err)
	}
	vs, err := e.Evaluate(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	return policy.Messages(vs)
}

func heavyNodePool() map[string]any {
	return map[string]any{
		"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
		"metadata": map[string]any{"name": "heavy"},
		"spec":     map[string]any{"weight": 90},
	}
}

// TestPolicyReconcilerCompiles reconciles one ProvisioningPolicy and checks its status (Ready condition,
// compiledGeneration, compileError, the audit's fields kept), the Events, what the engine holds and how it
// judges a NodePool, OnChange and the readiness check.
func TestPolicyReconcilerCompiles(t *testing.T) {
	const (
		parseError = "policy cap-weight: spec.rego:5:1: rego_parse_error: unexpected } token"
		httpError  = "policy cap-weight: spec.rego:4:2: rego_type_error: builtin http.send is not allowed: policies may not call network, clock, random, UUID or runtime builtins (http.*, net.* other than net.cidr_contains, net.cidr_contains_matches, net.cidr_intersects, net.cidr_is_valid, net.cidr_merge, rand.*, uuid.*, time.now_ns, opa.runtime, or any OPA marks non-deterministic), so that the webhook, audit and offline check always agree; derive the value from input.review, input.parameters or data.inventory instead"
		ruleError  = "policy cap-weight: spec.rego: no rule \"violation\" in package t.cap_weight; add `violation contains {\"msg\": msg} if { ... }`"
		specError  = "spec: convert ProvisioningPolicy \"cap-weight\": spec.parameters: must be an object, got an array; write named parameters such as {allowedTeams: [a, b]}"
	)
	withStatus := func(pp *v1alpha1.ProvisioningPolicy, compiled int64) *v1alpha1.ProvisioningPolicy {
		pp.Status.CompiledGeneration = compiled
		pp.Status.TotalViolations = 4 // written by the audit; compiling must keep it
		return pp
	}
	arrayParameters := testPolicy("cap-weight", 3, regoCapWeight)
	arrayParameters.Spec.Parameters = &apiextensionsv1.JSON{Raw: []byte(`[1, 2]`)}
	tests := []struct {
		name string
		pp   *v1alpha1.ProvisioningPolicy
		// installed is an older version the engine holds before the reconcile.
		installed    *v1alpha1.ProvisioningPolicy
		wantReady    metav1.ConditionStatus
		wantReason   string
		wantMessage  string
		wantError    string // status.compileError
		wantEvents   []string
		wantPolicies []string // in the engine
		wantVerdict  []string // for a NodePool of weight 90
	}{
		{
			name:         "valid policy compiled and enforced",
			pp:           withStatus(testPolicy("cap-weight", 2, regoCapWeight), 0),
			wantReady:    metav1.ConditionTrue,
			wantReason:   ReasonCompiled,
			wantMessage:  "the policy is compiled and enforced",
			wantEvents:   []string{"Normal Compiled generation 2 compiled"},
			wantPolicies: []string{"cap-weight"},
			wantVerdict:  []string{"[cap-weight] weight 90 above 50 (field: spec.weight)"},
		},
		{
			name:         "new generation replaces the enforced one",
			pp:           withStatus(testPolicy("cap-weight", 2, strings.Replace(regoCapWeight, "w > max", "w > max + 100", 1)), 1),
			installed:    testPolicy("cap-weight", 1, regoCapWeight),
			wantReady:    metav1.ConditionTrue,
			wantReason:   ReasonCompiled,
			wantMessage:  "the policy is compiled and enforced",
			wantEvents:   []string{"Normal Compiled generation 2 compiled"},
			wantPolicies: []string{"cap-weight"},
		},
		{
			name:         "generation already compiled (a restart): no Event",
			pp:           withStatus(testPolicy("cap-weight", 2, regoCapWeight), 2),
			wantReady:    metav1.ConditionTrue,
			wantReason:   ReasonCompiled,
			wantMessage:  "the policy is compiled and enforced",
			wantPolicies: []string{"cap-weight"},
			wantVerdict:  []string{"[cap-weight] weight 90 above 50 (field: spec.weight)"},
		},
		{
			name:         "Rego that does not parse",
			pp:           withStatus(testPolicy("cap-weight", 2, regoDoesNotParse), 1),
			installed:    testPolicy("cap-weight", 1, regoCapWeight),
			wantReady:    metav1.ConditionFalse,
			wantReason:   ReasonCompileFailed,
			wantMessage:  parseError,
			wantError:    parseError,
			wantEvents:   []string{"Warning CompileFailed " + parseError},
			wantPolicies: []string{"cap-weight"}, // installed broken: it reports errors instead of the old verdicts
			wantVerdict:  []string{"[cap-weight] policy evaluation failed: " + parseError},
		},
		{
			name:         "forbidden builtin",
			pp:           withStatus(testPolicy("cap-weight", 1, regoHTTPSend), 0),
			wantReady:    metav1.ConditionFalse,
			wantReason:   ReasonCompileFailed,
			wantMessage:  httpError,
			wantError:    httpError,
			wantEvents:   []string{"Warning CompileFailed " + httpError},
			wantPolicies: []string{"cap-weight"},
			wantVerdict:  []string{"[cap-weight] policy evaluation failed: " + httpError},
		},
		{
			name:         "no violation rule",
			pp:           withStatus(testPolicy("cap-weight", 1, regoNoViolationRule), 0),
			wantReady:    metav1.ConditionFalse,
			wantReason:   ReasonCompileFailed,
			wantMessage:  ruleError,
			wantError:    ruleError,
			wantEvents:   []string{"Warning CompileFailed " + ruleError},
			wantPolicies: []string{"cap-weight"},
			wantVerdict:  []string{"[cap-weight] policy evaluation failed: " + ruleError},
		},
		{
			name:         "unusable spec drops the enforced version",
			pp:           withStatus(arrayParameters, 2),
			installed:    testPolicy("cap-weight", 2, regoCapWeight),
			wantReady:    metav1.ConditionFalse,
			wantReason:   ReasonCompileFailed,
			wantMessage:  specError,
			wantError:    specError,
			wantEvents:   []string{"Warning CompileFailed " + specError},
			wantPolicies: []string{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			c := newClient(t, tc.pp)
			engine := policy.New(policy.Options{})
			if tc.installed != nil {
				if err := engine.UpsertPolicy(ctx, enginePolicy(tc.installed)); err != nil {
					t.Fatal(err)
				}
			}
			recorder := events.NewFakeRecorder(10)
			changes := 0
			r := &PolicyReconciler{Client: c, Engine: engine, Recorder: recorder, OnChange: func() { changes++ }}
			if res, err := r.Reconcile(ctx, request(tc.pp.Name)); err != nil || !res.IsZero() {
				t.Fatalf("Reconcile = %+v, %v; want no requeue and no error", res, err)
			}

			got := &v1alpha1.ProvisioningPolicy{}
			if err := c.Get(ctx, client.ObjectKey{Name: tc.pp.Name}, got); err != nil {
				t.Fatal(err)
			}
			cond := meta.FindStatusCondition(got.Status.Conditions, v1alpha1.ConditionReady)
			if cond == nil {
				t.Fatalf("no Ready condition in %+v", got.Status)
			}
			if cond.Status != tc.wantReady || cond.Reason != tc.wantReason || cond.Message != tc.wantMessage || cond.ObservedGeneration != tc.pp.Generation {
				t.Errorf("Ready = %s/%s %q (observed generation %d), want %s/%s %q (%d)",
					cond.Status, cond.Reason, cond.Message, cond.ObservedGeneration, tc.wantReady, tc.wantReason, tc.wantMessage, tc.pp.Generation)
			}
			if got.Status.CompileError != tc.wantError {
				t.Errorf("compileError %q, want %q", got.Status.CompileError, tc.wantError)
			}
			// compiledGeneration names the last generation that compiled: the reviewed one when it
			// compiles, and whatever it was before when it does not.
			wantCompiled := tc.pp.Status.CompiledGeneration
			if tc.wantReady == metav1.ConditionTrue {
				wantCompiled = tc.pp.Generation
			}
			if got.Status.CompiledGeneration != wantCompiled {
				t.Errorf("compiledGeneration %d, want %d", got.Status.CompiledGeneration, wantCompiled)
			}
			if got.Status.TotalViolations != 4 {
				t.Errorf("totalViolations %d; the audit's status fields must survive compiling", got.Status.TotalViolations)
			}
			if ev := eventstest.Drain(recorder); !slices.Equal(ev, tc.wantEvents) {
				t.Errorf("events\n got %q\nwant %q", ev, tc.wantEvents)
			}
			if names := engine.PolicyNames(); !slices.Equal(names, tc.wantPolicies) {
				t.Errorf("engine policies %q, want %q", names, tc.wantPolicies)
			}
			if v := verdict(t, engine, heavyNodePool()); !slices.Equal(v, tc.wantVerdict) {
				t.Errorf("verdict on a NodePool of weight 90\n got %q\nwant %q", v, tc.wantVerdict)
			}
			if changes != 1 {
				t.Errorf("OnChange called %d times, want 1", changes)
			}
			if err := r.Synced(ctx, c); err != nil {
				t.Errorf("Synced after the reconcile: %v", err)
			}
		})
	}
}

// TestPolicyReconcilerRemoves compiles a policy, then deletes it, and checks that the engine forgets it and
// the readiness check no longer waits for it, whether it is gone or held by a finalizer.
func TestPolicyReconcilerRemoves(t *testing.T) {
	tests := []struct {
		name       string
		finalizers []string
	}{
		{name: "deleted from the cluster"},
		{name: "being deleted, held by a finalizer", finalizers: []string{"argocd.argoproj.io/resources-finalizer"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			pp := testPolicy("cap-weight", 1, regoCapWeight)
			pp.Finalizers = tc.finalizers
			c := newClient(t, pp, testPolicy("other", 1, regoCapWeight))
			engine := policy.New(policy.Options{})
			recorder := events.NewFakeRecorder(10)
			changes := 0
			r := &PolicyReconciler{Client: c, Engine: engine, Recorder: recorder, OnChange: func() { changes++ }}
			for _, name := range []string{"cap-weight", "other"} {
				if _, err := r.Reconcile(ctx, request(name)); err != nil {
					t.Fatal(err)
				}
			}
			if names := engine.PolicyNames(); !slices.Equal(names, []string{"cap-weight", "other"}) {
				t.Fatalf("engine policies %q before the deletion", names)
			}
			eventstest.Drain(recorder)
			changes = 0

			if err := c.Delete(ctx, &v1alpha1.ProvisioningPolicy{ObjectMeta: metav1.ObjectMeta{Name: "cap-weight"}}); err != nil {
				t.Fatal(err)
			}
			if res, err := r.Reconcile(ctx, request("cap-weight")); err != nil || !res.IsZero() {
				t.Fatalf("Reconcile = %+v, %v", res, err)
			}
			if names := engine.PolicyNames(); !slices.Equal(names, []string{"other"}) {
				t.Errorf("engine policies %q, want only %q", names, "other")
			}
			if changes != 1 {
				t.Errorf("OnChange called %d times, want 1", changes)
			}
			if ev := eventstest.Drain(recorder); len(ev) != 0 {
				t.Errorf("unexpected events %q", ev)
			}
			if err := r.Synced(ctx, c); err != nil {
				t.Errorf("Synced after the deletion: %v", err)
			}
			// A reader that still lists the policy as live (a lagging cache) sees it as not compiled.
			stale := newClient(t, testPolicy("cap-weight", 1, regoCapWeight), testPolicy("other", 1, regoCapWeight))
			if err := r.Synced(ctx, stale); err == nil || err.Error() != "policy cap-weight generation 1 is not compiled yet" {
				t.Errorf("Synced with the removed policy listed live = %v, want it reported as not compiled", err)
			}
		})
	}
}

// TestPolicyReconcilerSynced checks the readiness check against what a reader lists: every live policy must
// be compiled at its current generation.
func TestPolicyReconcilerSynced(t *testing.T) {
	listFails := interceptor.Funcs{List: func(context.Context, client.WithWatch, client.ObjectList, ...client.ListOption) error {
		return errors.New("cache not started")
	}}
	// deleting is held by a finalizer, at the generation the apiserver gives it when deletion starts.
	deleting := testPolicy("leaving", 2, regoCapWeight)
	deleting.Finalizers = []string{"argocd.argoproj.io/resources-finalizer"}
	deleting.DeletionTimestamp = &metav1.Time{Time: time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)}
	tests := []struct {
		name       string
		reconciled []*v1alpha1.ProvisioningPolicy // compiled, in order
		deleted    []string                       // then deleted from the cluster and reconciled again
		listed     []*v1alpha1.ProvisioningPolicy // what the readiness check's reader lists
		listFails  bool
		wantErr    string
	}{
		{
			name:       "every generation compiled",
			reconciled: []*v1alpha1.ProvisioningPolicy{testPolicy("a", 1, regoCapWeight), testPolicy("b", 4, regoCapWeight)},
			listed:     []*v1alpha1.ProvisioningPolicy{testPolicy("a", 1, regoCapWeight), testPolicy("b", 4, regoCapWeight)},
		},
		{
			name:   "no policies at all",
			listed: nil,
		},
		{
			name:       "a policy not reconciled yet",
			reconciled: []*v1alpha1.ProvisioningPolicy{testPolicy("a", 1, regoCapWeight)},
			listed:     []*v1alpha1.ProvisioningPolicy{testPolicy("a", 1, regoCapWeight), testPolicy("b", 1, regoCapWeight)},
			wantErr:    "policy b generation 1 is not compiled yet",
		},
		{
			name:       "a newer generation than the compiled one",
			reconciled: []*v1alpha1.ProvisioningPolicy{testPolicy("a", 1, regoCapWeight)},
			listed:     []*v1alpha1.ProvisioningPolicy{testPolicy("a", 2, regoCapWeight)},
			wantErr:    "policy a generation 2 is not compiled yet",
		},
		{
			name:       "a policy that failed to compile is processed",
			reconciled: []*v1alpha1.ProvisioningPolicy{testPolicy("broken", 3, regoDoesNotParse)},
			listed:     []*v1alpha1.ProvisioningPolicy{testPolicy("broken", 3, regoDoesNotParse)},
		},
		{
			name:       "a deleted policy is forgotten",
			reconciled: []*v1alpha1.ProvisioningPolicy{testPolicy("a", 1, regoCapWeight), testPolicy("b", 1, regoCapWeight)},
			deleted:    []string{"b"},
			listed:     []*v1alpha1.ProvisioningPolicy{testPolicy("a", 1, regoCapWeight)},
		},
		{
			name:       "a policy being deleted is not waited for",
			reconciled: []*v1alpha1.ProvisioningPolicy{testPolicy("a", 1, regoCapWeight)},
			listed:     []*v1alpha1.ProvisioningPolicy{testPolicy("a", 1, regoCapWeight), deleting},
		},
		{
			name:      "the list fails",
			listFails: true,
			wantErr:   "list provisioningpolicies: cache not started",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			var objects []client.Object
			for _, pp := range tc.reconciled {
				objects = append(objects, pp)
			}
			c := newClient(t, objects...)
			r := &PolicyReconciler{Client: c, Engine: policy.New(policy.Options{}), Recorder: events.NewFakeRecorder(100)}
			for _, pp := range tc.reconciled {
				if _, err := r.Reconcile(ctx, request(pp.Name)); err != nil {
					t.Fatal(err)
				}
			}
			for _, name := range tc.deleted {
				if err := c.Delete(ctx, &v1alpha1.ProvisioningPolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
					t.Fatal(err)
				}
				if _, err := r.Reconcile(ctx, request(name)); err != nil {
					t.Fatal(err)
				}
			}
			builder := fake.NewClientBuilder().WithScheme(testScheme(t))
			for _, pp := range tc.listed {
				builder = builder.WithObjects(pp)
			}
			if tc.listFails {
				builder = builder.WithInterceptorFuncs(listFails)
			}
			err := r.Synced(ctx, builder.Build())
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("Synced: %v, want nil", err)
			case tc.wantErr != "" && (err == nil || err.Error() != tc.wantErr):
				t.Errorf("Synced: %v, want %q", err, tc.wantErr)
			}
		})
	}
}

// newInventoryReconciler returns an InventoryReconciler for obj's kind, resolved from the scheme exactly
// as SetupWithManager resolves it.
func newInventoryReconciler(t *testing.T, c client.Client, e *policy.Engine, obj client.Object) *InventoryReconciler {
	t.Helper()
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	if err != nil {
		t.Fatal(err)
	}
	return &InventoryReconciler{Client: c, Engine: e, Object: obj, gvk: gvk}
}

// TestInventoryReconciler mirrors NodePools and LocalNodeClasses into data.inventory step by step and
// checks each step through the verdict of a policy that reasons over the inventory.
func TestInventoryReconciler(t *testing.T) {
	ctx := context.Background()
	c := newClient(t)
	engine := policy.New(policy.Options{})
	inv := testPolicy("inventory", 1, regoInventory)
	p := enginePolicy(inv)
	p.Parameters = nil
	if err := engine.UpsertPolicy(ctx, p); err != nil {
		t.Fatal(err)
	}
	nodePools := newInventoryReconciler(t, c, engine, &karpv1.NodePool{})
	classes := newInventoryReconciler(t, c, engine, &v1alpha1.LocalNodeClass{})

	nodePool := func(name, team string) *karpv1.NodePool {
		return &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"team": team}}}
	}
	// candidate is the NodePool under review: team x, on the LocalNodeClass "local".
	candidate := map[string]any{
		"apiVersion": "karpenter.sh/v1", "kind": "NodePool",
		"metadata": map[string]any{"name": "candidate", "labels": map[string]any{"team": "x"}},
		"spec": map[string]any{"template": map[string]any{"spec": map[string]any{
			"nodeClassRef": map[string]any{"group": "joiner.dev", "kind": "LocalNodeClass", "name": "local"}}}},
	}
	missingClass := "[inventory] LocalNodeClass local is not in the inventory"
	steps := []struct {
		name       string
		change     func() error
		reconciler *InventoryReconciler
		reconcile  string
		want       []string
	}{
		{
			name: "empty inventory", reconciler: nodePools, reconcile: "never-existed",
			want: []string{missingClass},
		},
		{
			name: "LocalNodeClass created",
			change: func() error {
				return c.Create(ctx, &v1alpha1.LocalNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "local"}})
			},
			reconciler: classes, reconcile: "local",
		},
		{
			name:       "NodePool of the same team created",
			change:     func() error { return c.Create(ctx, nodePool("a", "x")) },
			reconciler: nodePools, reconcile: "a",
			want: []string{`[inventory] team x already has NodePools ["a"]`},
		},
		{
			name:       "NodePool of another team created",
			change:     func() error { return c.Create(ctx, nodePool("c", "y")) },
			reconciler: nodePools, reconcile: "c",
			want: []string{`[inventory] team x already has NodePools ["a"]`},
		},
		{
			name:       "second NodePool of the same team created",
			change:     func() error { return c.Create(ctx, nodePool("b", "x")) },
			reconciler: nodePools, reconcile: "b",
			want: []string{`[inventory] team x already has NodePools ["a", "b"]`},
		},
		{
			name: "NodePool moved to another team",
			change: func() error {
				np := &karpv1.NodePool{}
				if err := c.Get(ctx, client.ObjectKey{Name: "a"}, np); err != nil {
					return err
				}
				np.Labels["team"] = "y"
				return c.Update(ctx, np)
			},
			reconciler: nodePools, reconcile: "a",
			want: []string{`[inventory] team x already has NodePools ["b"]`},
		},
		{
			name:       "NodePool deleted",
			change:     func() error { return c.Delete(ctx, nodePool("b", "x")) },
			reconciler: nodePools, reconcile: "b",
		},
		{
			name: "LocalNodeClass deleted",
			change: func() error {
				return c.Delete(ctx, &v1alpha1.LocalNodeClass{ObjectMeta: metav1.ObjectMeta{Name: "local"}})
			},
			reconciler: classes, reconcile: "local",
			want: []string{missingClass},
		},
		{
			name: "a NodePool named like the class is not a class", reconciler: nodePools, reconcile: "local",
			change: func() error { return c.Create(ctx, nodePool("local", "z")) },
			want:   []string{missingClass},
		},
	}
	for _, step := range steps {
		if step.change != nil {
			if err := step.change(); err != nil {
				t.Fatalf("step %q: %v", step.name, err)
			}
		}
		if res, err := step.reconciler.Reconcile(ctx, request(step.reconcile)); err != nil || !res.IsZero() {
			t.Fatalf("step %q: Reconcile = %+v, %v", step.name, res, err)
		}
		if got := verdict(t, engine, candidate); !slices.Equal(got, step.want) {
			t.Errorf("step %q: verdict\n got %q\nwant %q", step.name, got, step.want)
		}
	}
}

func ptrTo[T any](v T) *T { return &v }
