// Package audit re-evaluates the objects already in the cluster against the ProvisioningPolicies,
// periodically and whenever a policy changes, and reports what it finds in each policy's status, as
// Events and as Prometheus metrics. It uses the same engine as the admission webhooks, backs off a
// policy whose evaluations keep failing, and checks Pods against the built-in NodePool tenancy rule
// (package tenancy), which the fail-open Pod webhooks may have missed. It only reads the objects it
// audits.
package audit

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	joinerv1alpha1 "github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/batcher"
	"github.com/joiner-dev/joiner/policy"
)

// ControllerName names the audit (logs, events).
const ControllerName = "joiner-audit"

// MaxReportedViolations is how many violations a policy's status lists (the CRD's maxItems).
const MaxReportedViolations = 20

// DefaultInterval is how often the audit runs when nothing triggers it.
const DefaultInterval = time.Minute

// Timing of triggered runs: a burst of triggers (policy changes) settles into one run,
// triggerSettle after the last trigger of the burst and at most triggerMaxDelay after the first.
const (
	triggerSettle   = 500 * time.Millisecond
	triggerMaxDelay = 5 * time.Second
)

// Auditor runs the audit. It is a manager Runnable that runs on the leader only.
type Auditor struct {
	Client   client.Client
	Engine   *policy.Engine
	Recorder events.EventRecorder
	// Interval between periodic runs; zero means DefaultInterval. Set it before the first Trigger
	// or Start.
	Interval time.Duration
	// Clock times the runs and stamps the status; nil means the real clock.
	Clock  clock.Clock
	Log    logr.Logger
	Metric *Metrics
	// ErrorBackoff is how long the audit leaves out a policy after a run in which evaluating it failed;
	// it doubles with every further failing run, up to MaxErrorBackoff. Zero means twice the Interval.
	ErrorBackoff time.Duration
	// MaxErrorBackoff caps ErrorBackoff's doubling; zero means DefaultMaxErrorBackoff.
	MaxErrorBackoff time.Duration

	initOnce sync.Once // guards batcher: Trigger runs on other goroutines than Start
	batcher  *batcher.Batcher

	// mu serialises runs, which share what follows.
	mu sync.Mutex
	// backoff holds the policies whose evaluations failed; runs leave them out (policy.Review.Skip)
	// until their backoff ends.
	backoff map[string]*policyBackoff
	// tenancy is what the last run reported about the built-in tenancy rule.
	tenancy tenancyReport
}

// Trigger asks for a run soon; it never blocks.
func (a *Auditor) Trigger() {
	a.init()
	a.batcher.Trigger()
}

func (a *Auditor) init() {
	a.initOnce.Do(func() {
		a.batcher = &batcher.Batcher{Idle: triggerSettle, MaxDuration: triggerMaxDelay, Period: a.interval(), Clock: a.clockOrReal()}
	})
}

// clockOrReal returns the Clock, or the real clock when none is set.
func (a *Auditor) clockOrReal() clock.Clock {
	if a.Clock == nil {
		return clock.RealClock{}
	}
	return a.Clock
}

// NeedLeaderElection makes the audit run on the leader only.
func (a *Auditor) NeedLeaderElection() bool { return true }

// Start runs the audit until ctx ends: once right away, then every Interval, and shortly after a
// Trigger (a burst of triggers settles into one run).
func (a *Auditor) Start(ctx context.Context) error {
	a.init()
	for {
		if err := a.RunOnce(ctx); err != nil && ctx.Err() == nil {
			a.Log.Error(err, "audit run failed")
		}
		if !a.batcher.Wait(ctx) {
			return nil
		}
	}
}

// audited lists one kind of object the audit evaluates.
type audited struct {
	list func() client.ObjectList
	gvk  schema.GroupVersionKind
	// opts are the listing's options: the pods (every pod, every run) are read without a deep copy
	// of the cache's objects, which the audit only reads.
	opts []client.ListOption
}

func auditedKinds() []audited {
	return []audited{
		{func() client.ObjectList { return &karpv1.NodePoolList{} }, karpv1.GroupVersion.WithKind("NodePool"), nil},
		{func() client.ObjectList { return &karpv1.NodeClaimList{} }, karpv1.GroupVersion.WithKind("NodeClaim"), nil},
		{func() client.ObjectList { return &awsv1.EC2NodeClassList{} }, awsv1.GroupVersion.WithKind("EC2NodeClass"), nil},
		{func() client.ObjectList { return &joinerv1alpha1.LocalNodeClassList{} }, joinerv1alpha1.GroupVersion.WithKind("LocalNodeClass"), nil},
		{func() client.ObjectList { return &corev1.PodList{} }, corev1.SchemeGroupVersion.WithKind("Pod"), []client.ListOption{client.UnsafeDisableDeepCopy}},
	}
}

// RunOnce evaluates every audited object once and publishes the results: the ProvisioningPolicies'
// (those backing off left out) and the built-in tenancy rule's. Runs are serialised.
func (a *Auditor) RunOnce(ctx context.Context) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	clk := a.clockOrReal()
	start := clk.Now()
	namespaces, err := a.namespaces(ctx)
	if err != nil {
		return err
	}
	policies := &joinerv1alpha1.ProvisioningPolicyList{}
	if err := a.Client.List(ctx, policies); err != nil {
		return fmt.Errorf("audit: list provisioningpolicies: %w", err)
	}
	skip := a.backingOff(policies.Items, start)
	nsLabels := make(map[string]map[string]string, len(namespaces))
	for i := range namespaces {
		nsLabels[namespaces[i].Name] = namespaces[i].Labels
	}
	found := map[string][]joinerv1alpha1.AuditViolation{}
	actions := map[string]policy.Action{}
	failed := map[string]string{}
	var pods []corev1.Pod
	var nodePools []karpv1.NodePool
	for _, k := range auditedKinds() {
		list := k.list()
		if err := a.Client.List(ctx, list, k.opts...); err != nil {
			if apierrors.IsNotFound(err) || isNoMatch(err) {
				continue // a CRD that is not installed (e.g. EC2NodeClass on a local cluster)
			}
			return fmt.Errorf("audit: list %s: %w", k.gvk.Kind, err)
		}
		switch l := list.(type) {
		case *corev1.PodList:
			pods = l.Items
		case *karpv1.NodePoolList:
			nodePools = l.Items
		}
		items, err := listItems(list)
		if err != nil {
			return err
		}
		for _, obj := range items {
			m, err := policy.ObjectToMap(obj, k.gvk)
			if err != nil {
				return err
			}
			// The same input builder and decision as the webhook and the offline checks.
			review, err := policy.BuildReview(policy.ReviewInput{Operation: policy.OperationCreate, Object: m})
			if err != nil {
				return fmt.Errorf("audit %s: %w", k.gvk.Kind, err)
			}
			review.NamespaceLabels = nsLabels[review.Namespace]
			review.Skip = skip
			verdict, err := a.Engine.Decide(ctx, review)
			if err != nil {
				return fmt.Errorf("audit %s %s: %w", k.gvk.Kind, review.Name, err)
			}
			for _, v := range verdict.All() {
				msg := v.Message
				if v.IsError() {
					msg = "evaluation error: " + v.Err.Error()
					if _, seen := failed[v.Policy]; !seen {
						failed[v.Policy] = fmt.Sprintf("%s %s: %v", k.gvk.Kind, objectName(review.Namespace, review.Name), v.Err)
					}
				}
				found[v.Policy] = append(found[v.Policy], joinerv1alpha1.AuditViolation{
					Kind: k.gvk.Kind, Name: review.Name, Namespace: review.Namespace, Message: msg, Field: v.Field})
				actions[v.Policy] = v.Action
			}
		}
	}
	a.recordFailures(policies.Items, skip, failed, start)
	if a.Metric != nil {
		a.Metric.Violations.Reset()
	}
	if err := a.publish(ctx, policies.Items, skip, found, actions); err != nil {
		return err
	}
	if err := a.auditTenancy(ctx, namespaces, pods, nodePools); err != nil {
		return err
	}
	if a.Metric != nil {
		a.Metric.Runs.Inc()
		a.Metric.Duration.Observe(clk.Since(start).Seconds())
	}
	return nil
}

// namespaces lists the cluster's Namespaces: their labels select Pod policies, their annotations bind
// them to NodePools.
func (a *Auditor) namespaces(ctx context.Context) ([]corev1.Namespace, error) {
	nss := &corev1.NamespaceList{}
	if err := a.Client.List(ctx, nss); err != nil {
		return nil, fmt.Errorf("audit: list namespaces: %w", err)
	}
	return nss.Items, nil
}

// objectName is "namespace/name", or name for a cluster-scoped object.
func objectName(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// publish writes each policy's audit status, and emits an Event when its count changes. A policy left
// out of this run (skip) keeps the status and count of the run that last evaluated it.
func (a *Auditor) publish(ctx context.Context, policies []joinerv1alpha1.ProvisioningPolicy, skip map[string]bool,
	found map[string][]joinerv1alpha1.AuditViolation, actions map[string]policy.Action) error {
	now := metav1.NewTime(a.clockOrReal().Now())
	for i := range policies {
		pp := &policies[i]
		if skip[pp.Name] {
			if a.Metric != nil {
				a.Metric.Violations.WithLabelValues(pp.Name, string(pp.Spec.EnforcementAction)).Set(float64(pp.Status.TotalViolations))
			}
			continue
		}
		vs := found[pp.Name]
		sort.Slice(vs, func(i, j int) bool {
			if vs[i].Kind != vs[j].Kind {
				return vs[i].Kind < vs[j].Kind
			}
			if vs[i].Namespace != vs[j].Namespace {
				return vs[i].Namespace < vs[j].Namespace
			}
			if vs[i].Name != vs[j].Name {
				return vs[i].Name < vs[j].Name
			}
			return vs[i].Message < vs[j].Message
		})
		total := int32(len(vs))
		if len(vs) > MaxReportedViolations {
			vs = vs[:MaxReportedViolations]
		}
		action := string(pp.Spec.EnforcementAction)
		if act, ok := actions[pp.Name]; ok {
			action = string(act)
		}
		if a.Metric != nil {
			a.Metric.Violations.WithLabelValues(pp.Name, action).Set(float64(total))
		}
		prevTotal := pp.Status.TotalViolations
		patch := client.MergeFrom(pp.DeepCopy())
		pp.Status.AuditTimestamp = &now
		pp.Status.TotalViolations = total
		pp.Status.Violations = vs
		if err := a.Client.Status().Patch(ctx, pp, patch); err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("audit: update status of provisioningpolicy %s: %w", pp.Name, err)
		}
		if a.Recorder != nil && total != prevTotal {
			kind := "Normal"
			if total > 0 {
				kind = "Warning"
			}
			a.Recorder.Eventf(pp, nil, kind, "AuditViolations", "Audit", "audit found %d violation(s) of this policy (was %d)", total, prevTotal)
		}
	}
	return nil
}

func listItems(list client.ObjectList) ([]runtime.Object, error) {
	switch l := list.(type) {
	case *karpv1.NodePoolList:
		return objects(l.Items), nil
	case *karpv1.NodeClaimList:
		return objects(l.Items), nil
	case *awsv1.EC2NodeClassList:
		return objects(l.Items), nil
	case *joinerv1alpha1.LocalNodeClassList:
		return objects(l.Items), nil
	case *corev1.PodList:
		return objects(l.Items), nil
	}
	return nil, fmt.Errorf("audit: unsupported list %T", list)
}

// objects returns pointers to the items of a typed list.
func objects[T any, PT interface {
	*T
	runtime.Object
}](items []T) []runtime.Object {
	out := make([]runtime.Object, len(items))
	for i := range items {
		out[i] = PT(&items[i])
	}
	return out
}

func isNoMatch(err error) bool {
	return meta.IsNoMatchError(err)
}
