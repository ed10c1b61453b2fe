package audit_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/joiner-dev/joiner/testsupport/eventstest"

	"github.com/joiner-dev/joiner/testsupport/metricstest"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/api/scheme"
	"github.com/joiner-dev/joiner/controllers/audit"
	"github.com/joiner-dev/joiner/controllers/batcher/batchertest"
	"github.com/joiner-dev/joiner/policy"
	"github.com/joiner-dev/joiner/policy/policyobject"
)

// auditTime is the fake clock's time; whole seconds, as metav1.Time keeps them.
var auditTime = time.Date(2026, 3, 14, 15, 9, 26, 0, time.UTC)

// Rego bodies of the test policies; provisioningPolicy puts each in a package of its own, on lines 1-2.
const (
	regoNeedsTeam = `violation contains {"msg": "no team label", "field": "metadata.labels"} if {
	not input.review.object.metadata.labels.team
}`
	// regoTwoMessages reports every object twice, with messages out of order.
	regoTwoMessages = `violation contains {"msg": msg} if {
	some msg in ["z last", "a first"]
}`
	regoNodeSelector = `violation contains {"msg": "no nodeSelector", "field": "spec.nodeSelector"} if {
	not input.review.object.spec.nodeSelector
}`
	// regoNumericName reports a violation for an object whose name is a number above 10, and fails to
	// evaluate for one whose name is not a number: it then asks for a range over the engine's builtin
	// size cap, which stops the evaluation (a failing to_number alone only makes its rule undefined).
	regoNumericName = `violation contains {"msg": "name above 10"} if {
	to_number(input.review.object.metadata.name) > 10
}

violation contains {"msg": "never"} if {
	not regex.match("^[0-9]+$", input.review.object.metadata.name)
	count(numbers.range(1, 200000 + count(input.review.object.metadata.name))) < 0
}`
	// regoDoesNotParse fails to compile; the engine keeps it installed and reports an error wherever it applies.
	regoDoesNotParse = `violation contains {"msg": "x"} if {
	input.review.object.spec.limits.cpu >
}`
)

type policyOption func(*v1alpha1.ProvisioningPolicy)

func withStatus(total int32, vs ...v1alpha1.AuditViolation) policyOption {
	return func(pp *v1alpha1.ProvisioningPolicy) {
		pp.Status.TotalViolations = total
		pp.Status.Violations = vs
	}
}

func withNamespaceSelector(labels map[string]string) policyOption {
	return func(pp *v1alpha1.ProvisioningPolicy) {
		pp.Spec.Match.NamespaceSelector = &metav1.LabelSelector{MatchLabels: labels}
	}
}

func provisioningPolicy(name string, action v1alpha1.EnforcementAction, kinds []string, rego string, opts ...policyOption) *v1alpha1.ProvisioningPolicy {
	pp := &v1alpha1.ProvisioningPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1},
		Spec: v1alpha1.ProvisioningPolicySpec{
			Rego:              fmt.Sprintf("package t.%s\n\n%s\n", strings.ReplaceAll(name, "-", "_"), rego),
			EnforcementAction: action,
			Match:             v1alpha1.PolicyMatch{Kinds: kinds},
			Parameters:        &apiextensionsv1.JSON{Raw: []byte(`{}`)},
		},
	}
	for _, o := range opts {
		o(pp)
	}
	return pp
}

func nodePool(name string, labels map[string]string) *karpv1.NodePool {
	return &karpv1.NodePool{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func localNodeClass(name string) *v1alpha1.LocalNodeClass {
	return &v1alpha1.LocalNodeClass{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func namespace(name string, labels map[string]string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
}

func pod(ns, name string, nodeSelector map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{NodeSelector: nodeSelector, Containers: []corev1.Container{{Name: "app", Image: "app:1"}}},
	}
}

// fixture is an Auditor over a fake cluster, with a real engine holding the cluster's policies.
type fixture struct {
	client   client.Client
	engine   *policy.Engine
	recorder *events.FakeRecorder
	registry *prometheus.Registry
	clock    *batchertest.Clock
	auditor  *audit.Auditor
	// ran receives a signal after each completed run (coalesced: read the run count after it).
	ran chan struct{}
}

// signallingCounter is the audit's runs counter that also signals every completed run, so that
// tests wait for runs instead of polling.
type signallingCounter struct {
	prometheus.Counter
	ran chan struct{}
}

func (c signallingCounter) Inc() {
	c.Counter.Inc()
	select {
	case c.ran <- struct{}{}:
	default: // a signal is pending already; the waiter reads the count after it
	}
}

func newFixture(t *testing.T, policies []*v1alpha1.ProvisioningPolicy, objects []client.Object) *fixture {
	t.Helper()
	s, err := scheme.New()
	if err != nil {
		t.Fatal(err)
	}
	all := slices.Clone(objects)
	compiled := make([]policy.Policy, 0, len(policies))
	for _, pp := range policies {
		all = append(all, pp)
		p, err := policyobject.ToPolicy(pp)
		if err != nil {
			t.Fatal(err)
		}
		compiled = append(compiled, p)
	}
	f := &fixture{
		client: fake.NewClientBuilder().WithScheme(s).WithObjects(all...).
			WithStatusSubresource(&v1alpha1.ProvisioningPolicy{}).Build(),
		engine:   policy.New(policy.Options{}),
		recorder: events.NewFakeRecorder(100),
		registry: prometheus.NewRegistry(),
		clock:    batchertest.NewClock(auditTime),
		ran:      make(chan struct{}, 1),
	}
	// A policy that does not compile stays installed and reports evaluation errors, as in a cluster.
	var ce policy.CompileErrors
	if err := f.engine.SetPolicies(context.Background(), compiled); err != nil && !errors.As(err, &ce) {
		t.Fatal(err)
	}
	m, err := audit.NewMetrics(f.registry)
	if err != nil {
		t.Fatal(err)
	}
	m.Runs = signallingCounter{Counter: m.Runs, ran: f.ran}
	f.auditor = &audit.Auditor{Client: f.client, Engine: f.engine, Recorder: f.recorder, Clock: f.clock, Metric: m}
	return f
}

// events drains the recorded Events, sorted.
func (f *fixture) events() []string {
	out := eventstest.Drain(f.recorder)
	slices.Sort(out)
	return out
}

// status returns the audit status of the named policy.
func (f *fixture) status(t *testing.T, name string) v1alpha1.ProvisioningPolicyStatus {
	t.Helper()
	pp := &v1alpha1.ProvisioningPolicy{}
	if err := f.client.Get(context.Background(), client.ObjectKey{Name: name}, pp); err != nil {
		t.Fatal(err)
	}
	return pp.Status
}

// violationGauges returns joiner_audit_violations as "policy/enforcement_action" -> value.
func (f *fixture) violationGauges(t *testing.T) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, m := range metricstest.Family(t, f.registry, "joiner_audit_violations") {
		labels := map[string]string{}
		for _, lp := range m.GetLabel() {
			labels[lp.GetName()] = lp.GetValue()
		}
		out[labels["policy"]+"/"+labels["enforcement_action"]] = m.GetGauge().GetValue()
	}
	return out
}

// runs returns joiner_audit_runs_total and the sample count of joiner_audit_duration_seconds.
func (f *fixture) runs(t *testing.T) (runs float64, durations uint64) {
	t.Helper()
	for _, m := range metricstest.Family(t, f.registry, "joiner_audit_runs_total") {
		runs = m.GetCounter().GetValue()
	}
	for _, m := range metricstest.Family(t, f.registry, "joiner_audit_duration_seconds") {
		durations = m.GetHistogram().GetSampleCount()
	}
	return runs, durations
}

// unlabelledNodePools returns n NodePools named np-00, np-01, ... without a team label, in a shuffled
// order, so that sorting is the audit's doing.
func unlabelledNodePools(n int) []client.Object {
	out := make([]client.Object, n)
	for i := range n {
		out[i] = nodePool(fmt.Sprintf("np-%02d", i), nil)
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(n, func(i, j int) { out[i], out[j] = out[j], out[i] })
	return out
}

func nodePoolViolations(msg, field string, names ...string) []v1alpha1.AuditViolation {
	out := make([]v1alpha1.AuditViolation, len(names))
	for i, n := range names {
		out[i] = v1alpha1.AuditViolation{Kind: "NodePool", Name: n, Message: msg, Field: field}
	}
	return out
}

func npNames(from, to int) []string {
	var out []string
	for i := from; i < to; i++ {
		out = append(out, fmt.Sprintf("np-%02d", i))
	}
	return out
}

// wantStatus is the audit part of a policy's status after a run.
type wantStatus struct {
	total      int32
	violations []v1alpha1.AuditViolation
}

// TestAuditRunOnce runs one audit over a fake cluster and checks each policy's status (totalViolations, at
// most 20 violations sorted by kind, namespace, name and message, auditTimestamp from the clock), the
// joiner_audit_violations gauges, the Events (only when a count changes) and the run metrics.
func TestAuditRunOnce(t *testing.T) {
	nodePoolOnly := []string{"NodePool"}
	labelled := map[string]string{"team": "a"}
	bound := map[string]string{"joiner.dev/nodepools": "bound"}
	noTeam := "no team label"
	tests := []struct {
		name     string
		policies []*v1alpha1.ProvisioningPolicy
		objects  []client.Object
		want     map[string]wantStatus
		// wantGauges is joiner_audit_violations as "policy/enforcement_action" -> value.
		wantGauges map[string]float64
		wantEvents []string
	}{
		{
			name:     "every violation counted, the first 20 listed in order",
			policies: []*v1alpha1.ProvisioningPolicy{provisioningPolicy("needs-team", v1alpha1.EnforcementDeny, nodePoolOnly, regoNeedsTeam)},
			objects: append(unlabelledNodePools(25),
				nodePool("ok-0", labelled), nodePool("ok-1", labelled), localNodeClass("no-labels-but-not-matched")),
			want:       map[string]wantStatus{"needs-team": {total: 25, violations: nodePoolViolations(noTeam, "metadata.labels", npNames(0, 20)...)}},
			wantGauges: map[string]float64{"needs-team/Deny": 25},
			wantEvents: []string{"Warning AuditViolations audit found 25 violation(s) of this policy (was 0)"},
		},
		{
			name:     "sorted by kind, then namespace, then name, then message",
			policies: []*v1alpha1.ProvisioningPolicy{provisioningPolicy("two-messages", v1alpha1.EnforcementWarn, []string{"NodePool", "LocalNodeClass", "Pod"}, regoTwoMessages)},
			objects: []client.Object{
				namespace("a", nil), namespace("b", nil),
				pod("b", "api", nil), pod("a", "web", nil), nodePool("zeta", nil), pod("a", "api", nil),
				nodePool("alpha", nil), localNodeClass("local"),
			},
			want: map[string]wantStatus{"two-messages": {total: 12, violations: []v1alpha1.AuditViolation{
				{Kind: "LocalNodeClass", Name: "local", Message: "a first"},
				{Kind: "LocalNodeClass", Name: "local", Message: "z last"},
				{Kind: "NodePool", Name: "alpha", Message: "a first"},
				{Kind: "NodePool", Name: "alpha", Message: "z last"},
				{Kind: "NodePool", Name: "zeta", Message: "a first"},
				{Kind: "NodePool", Name: "zeta", Message: "z last"},
				{Kind: "Pod", Namespace: "a", Name: "api", Message: "a first"},
				{Kind: "Pod", Namespace: "a", Name: "api", Message: "z last"},
				{Kind: "Pod", Namespace: "a", Name: "web", Message: "a first"},
				{Kind: "Pod", Namespace: "a", Name: "web", Message: "z last"},
				{Kind: "Pod", Namespace: "b", Name: "api", Message: "a first"},
				{Kind: "Pod", Namespace: "b", Name: "api", Message: "z last"},
			}}},
			wantGauges: map[string]float64{"two-messages/Warn": 12},
			wantEvents: []string{"Warning AuditViolations audit found 12 violation(s) of this policy (was 0)"},
		},
		{
			name: "Pods matched by the labels of their namespace",
			policies: []*v1alpha1.ProvisioningPolicy{provisioningPolicy("pod-node-selector", v1alpha1.EnforcementDeny, []string{"Pod"}, regoNodeSelector,
				withNamespaceSelector(bound))},
			objects: []client.Object{
				namespace("team-a", bound), namespace("team-b", map[string]string{"joiner.dev/nodepools": "unbound"}), namespace("team-c", nil),
				pod("team-a", "web", nil), pod("team-a", "api", map[string]string{"karpenter.sh/nodepool": "team-a"}), pod("team-a", "db", nil),
				pod("team-b", "web", nil), pod("team-c", "web", nil),
			},
			want: map[string]wantStatus{"pod-node-selector": {total: 2, violations: []v1alpha1.AuditViolation{
				{Kind: "Pod", Namespace: "team-a", Name: "db", Message: "no nodeSelector", Field: "spec.nodeSelector"},
				{Kind: "Pod", Namespace: "team-a", Name: "web", Message: "no nodeSelector", Field: "spec.nodeSelector"},
			}}},
			wantGauges: map[string]float64{"pod-node-selector/Deny": 2},
			wantEvents: []string{"Warning AuditViolations audit found 2 violation(s) of this policy (was 0)"},
		},
		{
			name: "evaluation errors reported as violations",
			policies: []*v1alpha1.ProvisioningPolicy{
				provisioningPolicy("numeric-name", v1alpha1.EnforcementDeny, nodePoolOnly, regoNumericName),
				provisioningPolicy("broken", v1alpha1.EnforcementWarn, []string{"LocalNodeClass"}, regoDoesNotParse),
			},
			objects: []client.Object{nodePool("5", nil), nodePool("20", nil), nodePool("abc", nil), localNodeClass("local")},
			want: map[string]wantStatus{
				"numeric-name": {total: 2, violations: []v1alpha1.AuditViolation{
					{Kind: "NodePool", Name: "20", Message: "name above 10"},
					{Kind: "NodePool", Name: "abc", Message: `evaluation error: policy numeric-name: spec.rego:9: eval_builtin_error: numbers.range would build 200003 elements; one builtin call may build at most 100000 elements: iterate over the reviewed object's own collections (some x in input.review.object...) instead of a range of numbers, or narrow the range`},
				}},
				"broken": {total: 1, violations: []v1alpha1.AuditViolation{
					{Kind: "LocalNodeClass", Name: "local", Message: "evaluation error: policy broken: spec.rego:5:1: rego_parse_error: unexpected } token"},
				}},
			},
			wantGauges: map[string]float64{"numeric-name/Deny": 2, "broken/Warn": 1},
			wantEvents: []string{
				"Warning AuditViolations audit found 1 violation(s) of this policy (was 0)",
				"Warning AuditViolations audit found 2 violation(s) of this policy (was 0)",
			},
		},
		{
			name: "count unchanged: status refreshed, no Event",
			policies: []*v1alpha1.ProvisioningPolicy{provisioningPolicy("needs-team", v1alpha1.EnforcementDeny, nodePoolOnly, regoNeedsTeam,
				withStatus(2, nodePoolViolations("an older message", "", "gone-1", "gone-2")...))},
			objects:    []client.Object{nodePool("np-01", nil), nodePool("np-00", nil), nodePool("ok", labelled)},
			want:       map[string]wantStatus{"needs-team": {total: 2, violations: nodePoolViolations(noTeam, "metadata.labels", "np-00", "np-01")}},
			wantGauges: map[string]float64{"needs-team/Deny": 2},
		},
		{
			name: "count drops to zero: list cleared, Normal Event",
			policies: []*v1alpha1.ProvisioningPolicy{provisioningPolicy("needs-team", v1alpha1.EnforcementDeny, nodePoolOnly, regoNeedsTeam,
				withStatus(3, nodePoolViolations(noTeam, "metadata.labels", "np-00", "np-01", "np-02")...))},
			objects:    []client.Object{nodePool("np-00", labelled), nodePool("np-01", labelled)},
			want:       map[string]wantStatus{"needs-team": {total: 0}},
			wantGauges: map[string]float64{"needs-team/Deny": 0},
			wantEvents: []string{"Normal AuditViolations audit found 0 violation(s) of this policy (was 3)"},
		},
		{
			name: "one gauge per policy, labelled with its enforcement action",
			policies: []*v1alpha1.ProvisioningPolicy{
				provisioningPolicy("warn-team", v1alpha1.EnforcementWarn, nodePoolOnly, regoNeedsTeam),
				provisioningPolicy("dry-run-team", v1alpha1.EnforcementDryRun, nodePoolOnly, regoNeedsTeam),
				provisioningPolicy("clean", v1alpha1.EnforcementDeny, []string{"Pod"}, regoNodeSelector),
				provisioningPolicy("no-match", v1alpha1.EnforcementWarn, []string{"NodeClaim"}, regoNeedsTeam),
			},
			objects: []client.Object{nodePool("np-00", nil), nodePool("np-01", nil), nodePool("np-02", labelled)},
			want: map[string]wantStatus{
				"warn-team":    {total: 2, violations: nodePoolViolations(noTeam, "metadata.labels", "np-00", "np-01")},
				"dry-run-team": {total: 2, violations: nodePoolViolations(noTeam, "metadata.labels", "np-00", "np-01")},
				"clean":        {total: 0},
				"no-match":     {total: 0},
			},
			wantGauges: map[string]float64{"warn-team/Warn": 2, "dry-run-team/DryRun": 2, "clean/Deny": 0, "no-match/Warn": 0},
			wantEvents: []string{
				"Warning AuditViolations audit found 2 violation(s) of this policy (was 0)",
				"Warning AuditViolations audit found 2 violation(s) of this policy (was 0)",
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, tc.policies, tc.objects)
			if err := f.auditor.RunOnce(context.Background()); err != nil {
				t.Fatalf("RunOnce: %v", err)
			}
			for name, want := range tc.want {
				st := f.status(t, name)
				if st.TotalViolations != want.total {
					t.Errorf("%s: totalViolations %d, want %d", name, st.TotalViolations, want.total)
				}
				if len(st.Violations) > audit.MaxReportedViolations {
					t.Errorf("%s: %d violations listed, at most %d allowed", name, len(st.Violations), audit.MaxReportedViolations)
				}
				if !slices.Equal(st.Violations, want.violations) {
					t.Errorf("%s: violations\n got %+v\nwant %+v", name, st.Violations, want.violations)
				}
				if st.AuditTimestamp == nil || !st.AuditTimestamp.Time.Equal(auditTime) {
					t.Errorf("%s: auditTimestamp %v, want %v", name, st.AuditTimestamp, auditTime)
				}
			}
			if got := f.violationGauges(t); !maps.Equal(got, tc.wantGauges) {
				t.Errorf("joiner_audit_violations\n got %v\nwant %v", got, tc.wantGauges)
			}
			if got := f.events(); !slices.Equal(got, tc.wantEvents) {
				t.Errorf("events\n got %q\nwant %q", got, tc.wantEvents)
			}
			if runs, durations := f.runs(t); runs != 1 || durations != 1 {
				t.Errorf("joiner_audit_runs_total %v and %d duration samples, want 1 and 1", runs, durations)
			}
		})
	}
}

// TestAuditRerun runs the audit repeatedly over a changing cluster: the status, the gauges and the Events
// follow the changes, and a policy removed from the cluster loses its gauge.
func TestAuditRerun(t *testing.T) {
	f := newFixture(t, []*v1alpha1.ProvisioningPolicy{
		provisioningPolicy("needs-team", v1alpha1.EnforcementDeny, []string{"NodePool"}, regoNeedsTeam),
		provisioningPolicy("warn-team", v1alpha1.EnforcementWarn, []string{"NodePool"}, regoNeedsTeam),
	}, []client.Object{nodePool("np-00", nil), nodePool("np-01", nil)})
	ctx := context.Background()
	steps := []struct {
		name       string
		change     func(t *testing.T)
		wantTotal  int32 // of needs-team
		wantNames  []string
		wantGauges map[string]float64
		wantEvents []string
	}{
		{
			name:       "first run",
			wantTotal:  2,
			wantNames:  []string{"np-00", "np-01"},
			wantGauges: map[string]float64{"needs-team/Deny": 2, "warn-team/Warn": 2},
			wantEvents: []string{
				"Warning AuditViolations audit found 2 violation(s) of this policy (was 0)",
				"Warning AuditViolations audit found 2 violation(s) of this policy (was 0)",
			},
		},
		{
			name: "a violating NodePool is deleted",
			change: func(t *testing.T) {
				if err := f.client.Delete(ctx, nodePool("np-00", nil)); err != nil {
					t.Fatal(err)
				}
			},
			wantTotal:  1,
			wantNames:  []string{"np-01"},
			wantGauges: map[string]float64{"needs-team/Deny": 1, "warn-team/Warn": 1},
			wantEvents: []string{
				"Warning AuditViolations audit found 1 violation(s) of this policy (was 2)",
				"Warning AuditViolations audit found 1 violation(s) of this policy (was 2)",
			},
		},
		{
			name:       "nothing changes",
			wantTotal:  1,
			wantNames:  []string{"np-01"},
			wantGauges: map[string]float64{"needs-team/Deny": 1, "warn-team/Warn": 1},
		},
		{
			name: "a policy is deleted",
			change: func(t *testing.T) {
				if err := f.client.Delete(ctx, &v1alpha1.ProvisioningPolicy{ObjectMeta: metav1.ObjectMeta{Name: "warn-team"}}); err != nil {
					t.Fatal(err)
				}
				f.engine.RemovePolicy("warn-team")
			},
			wantTotal:  1,
			wantNames:  []string{"np-01"},
			wantGauges: map[string]float64{"needs-team/Deny": 1},
		},
	}
	for i, step := range steps {
		if step.change != nil {
			step.change(t)
		}
		f.clock.Step(time.Minute)
		if err := f.auditor.RunOnce(ctx); err != nil {
			t.Fatalf("step %q: RunOnce: %v", step.name, err)
		}
		st := f.status(t, "needs-team")
		want := nodePoolViolations("no team label", "metadata.labels", step.wantNames...)
		if st.TotalViolations != step.wantTotal || !slices.Equal(st.Violations, want) {
			t.Errorf("step %q: status total %d %+v, want %d %+v", step.name, st.TotalViolations, st.Violations, step.wantTotal, want)
		}
		if wantTime := auditTime.Add(time.Duration(i+1) * time.Minute); st.AuditTimestamp == nil || !st.AuditTimestamp.Time.Equal(wantTime) {
			t.Errorf("step %q: auditTimestamp %v, want %v", step.name, st.AuditTimestamp, wantTime)
		}
		if got := f.violationGauges(t); !maps.Equal(got, step.wantGauges) {
			t.Errorf("step %q: joiner_audit_violations\n got %v\nwant %v", step.name, got, step.wantGauges)
		}
		if got := f.events(); !slices.Equal(got, step.wantEvents) {
			t.Errorf("step %q: events\n got %q\nwant %q", step.name, got, step.wantEvents)
		}
		if runs, _ := f.runs(t); runs != float64(i+1) {
			t.Errorf("step %q: joiner_audit_runs_total %v, want %d", step.name, runs, i+1)
		}
	}
}

// TestAuditStartAndTrigger runs the Auditor as the manager does: it audits once at start, again when
// triggered (the periodic interval is an hour away), and returns when its context ends.
func TestAuditStartAndTrigger(t *testing.T) {
	f := newFixture(t, []*v1alpha1.ProvisioningPolicy{
		provisioningPolicy("needs-team", v1alpha1.EnforcementDeny, []string{"NodePool"}, regoNeedsTeam),
	}, []client.Object{nodePool("np-00", nil)})
	f.auditor.Interval = time.Hour
	if !f.auditor.NeedLeaderElection() {
		t.Error("the audit must run on the leader only")
	}
	// Trigger never blocks, even before Start and with a trigger already pending.
	f.auditor.Trigger()
	f.auditor.Trigger()

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f.auditor.Start(ctx) }()
	// The start-up run, then the pending trigger's.
	waitTriggeredRuns(t, f, 2)
	f.auditor.Trigger()
	waitTriggeredRuns(t, f, 3)
	if st := f.status(t, "needs-team"); st.TotalViolations != 1 {
		t.Errorf("totalViolations %d after the triggered runs, want 1", st.TotalViolations)
	}
	cancel()
	deadline, stop := context.WithTimeout(context.Background(), waitLimit)
	defer stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Start returned %v after its context ended, want nil", err)
		}
	case <-deadline.Done():
		t.Fatal("Start did not return after its context ended")
	}
}

// TestAuditTriggerWhileStarting calls Trigger from another goroutine while Start begins, as the policy
// controller (on every replica) does while the leader-elected audit starts. Under the race detector this
// catches unsynchronised initialisation of the trigger channel; without it, a lost trigger.
func TestAuditTriggerWhileStarting(t *testing.T) {
	f := newFixture(t, []*v1alpha1.ProvisioningPolicy{
		provisioningPolicy("needs-team", v1alpha1.EnforcementDeny, []string{"NodePool"}, regoNeedsTeam),
	}, []client.Object{nodePool("np-00", nil)})
	f.auditor.Interval = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	triggered := make(chan struct{})
	go func() {
		f.auditor.Trigger()
		close(triggered)
	}()
	go func() { done <- f.auditor.Start(ctx) }()
	<-triggered
	// Whichever came first, the trigger is not lost: a run follows the start-up run.
	waitTriggeredRuns(t, f, 2)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Start: %v", err)
	}
}

// TestAuditPeriodic runs the Auditor with nothing triggering it: it audits once at start, then
// again each time the fake clock reaches the next Interval, and not before.
func TestAuditPeriodic(t *testing.T) {
	f := newFixture(t, []*v1alpha1.ProvisioningPolicy{
		provisioningPolicy("needs-team", v1alpha1.EnforcementDeny, []string{"NodePool"}, regoNeedsTeam),
	}, []client.Object{nodePool("np-00", nil)})
	f.auditor.Interval = time.Hour
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- f.auditor.Start(ctx) }()
	waitRuns(t, f, 1)
	for i := 1; i <= 3; i++ {
		due := auditTime.Add(time.Duration(i) * f.auditor.Interval)
		// The audit waits for its next periodic run; until the clock gets there, nothing runs.
		waitArmed(t, f, due)
		if runs, _ := f.runs(t); runs != float64(i) {
			t.Fatalf("%v runs before the clock reached %v, want %d", runs, due, i)
		}
		f.clock.Step(due.Sub(f.clock.Now()))
		waitRuns(t, f, float64(i+1))
		if st := f.status(t, "needs-team"); st.AuditTimestamp == nil || !st.AuditTimestamp.Time.Equal(due) {
			t.Errorf("periodic run %d: auditTimestamp %v, want %v", i, st.AuditTimestamp, due)
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Start: %v", err)
	}
}

// waitLimit bounds, in real time, every wait for the audit running in the background.
const waitLimit = 10 * time.Second

// waitRuns waits until the fixture's audit has completed at least n runs, and fails the test after
// waitLimit. It leaves the clock alone.
func waitRuns(t *testing.T, f *fixture, n float64) {
	t.Helper()
	deadline, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	for {
		if runs, _ := f.runs(t); runs >= n {
			return
		}
		select {
		case <-f.ran:
		case <-deadline.Done():
			runs, _ := f.runs(t)
			t.Fatalf("the audit completed %v runs within %v, want %v", runs, waitLimit, n)
		}
	}
}

// waitTriggeredRuns is waitRuns for runs that triggers ask for: whenever the audit sets a timer
// that fires within a minute (the settling of a burst of triggers), it moves the fake clock to
// it. It never moves the clock to a periodic run, an Interval (an hour in these tests) away.
func waitTriggeredRuns(t *testing.T, f *fixture, n float64) {
	t.Helper()
	deadline, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	for {
		if runs, _ := f.runs(t); runs >= n {
			return
		}
		select {
		case <-f.ran:
		case fires := <-f.clock.Armed:
			if now := f.clock.Now(); fires.After(now) && fires.Sub(now) <= time.Minute {
				f.clock.Step(fires.Sub(now))
			}
		case <-deadline.Done():
			runs, _ := f.runs(t)
			t.Fatalf("the audit completed %v runs within %v, want %v", runs, waitLimit, n)
		}
	}
}

// waitArmed waits until the audit sets a timer, which must fire at want, and fails the test
// after waitLimit.
func waitArmed(t *testing.T, f *fixture, want time.Time) {
	t.Helper()
	deadline, cancel := context.WithTimeout(context.Background(), waitLimit)
	defer cancel()
	select {
	case fires := <-f.clock.Armed:
		if !fires.Equal(want) {
			t.Fatalf("the audit set a timer for %v, want %v", fires, want)
		}
	case <-deadline.Done():
		t.Fatalf("the audit set no timer within %v, want one for %v", waitLimit, want)
	}
}
