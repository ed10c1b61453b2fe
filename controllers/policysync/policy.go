// Package policysync keeps the policy engine in step with the cluster: it compiles each
// ProvisioningPolicy when its generation changes, reports the result in the policy's status, and
// mirrors NodePools and node classes into the engine's data.inventory. It evaluates nothing itself.
package policysync

import (
	"context"
	"errors"
	"fmt"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	joinerv1alpha1 "github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	"github.com/joiner-dev/joiner/policy"
	"github.com/joiner-dev/joiner/policy/policyobject"
)

// ControllerName names policy sync (logs, events).
const ControllerName = "joiner-policy"

// Condition reasons of a ProvisioningPolicy's Ready condition.
const (
	ReasonCompiled      = "Compiled"
	ReasonCompileFailed = "CompileFailed"
)

// PolicyReconciler compiles ProvisioningPolicies into the engine. Every replica runs it (not
// leader-elected), because every replica serves the webhooks that evaluate the policies; only the
// leader's status writes matter, and they are idempotent.
type PolicyReconciler struct {
	Client   client.Client
	Engine   *policy.Engine
	Recorder events.EventRecorder
	// OnChange, if set, is called after a policy is compiled or removed (the audit uses it).
	OnChange func()

	mu     sync.Mutex
	synced map[string]int64 // name -> generation the engine holds
}

// SetupWithManager registers the reconciler.
func (r *PolicyReconciler) SetupWithManager(mgr ctrl.Manager) error {
	needLeader := false
	return ctrl.NewControllerManagedBy(mgr).
		Named("policy-compile").
		For(&joinerv1alpha1.ProvisioningPolicy{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		WithOptions(controllerOptions(needLeader)).
		Complete(r)
}

// Reconcile compiles one policy and records the outcome in its status.
func (r *PolicyReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	logger := log.FromContext(ctx)
	pp := &joinerv1alpha1.ProvisioningPolicy{}
	if err := r.Client.Get(ctx, req.NamespacedName, pp); err != nil {
		if apierrors.IsNotFound(err) {
			r.Engine.RemovePolicy(req.Name)
			r.setSynced(req.Name, 0, false)
			r.changed()
			logger.Info("policy removed from the engine", "policy", req.Name)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("get provisioningpolicy %s: %w", req.Name, err)
	}
	if !pp.DeletionTimestamp.IsZero() {
		r.Engine.RemovePolicy(pp.Name)
		r.setSynced(pp.Name, 0, false)
		r.changed()
		return ctrl.Result{}, nil
	}

	compileErr := r.compile(ctx, pp)
	r.setSynced(pp.Name, pp.Generation, true)
	r.changed()

	cond := metav1.Condition{Type: joinerv1alpha1.ConditionReady, Status: metav1.ConditionTrue, Reason: ReasonCompiled,
		Message: "the policy is compiled and enforced", ObservedGeneration: pp.Generation}
	status := pp.Status.DeepCopy()
	if compileErr != nil {
		// CompiledGeneration keeps naming the last generation that compiled; the failed one matches
		// reviews with an error result, so a Deny policy fails closed until it is fixed.
		cond.Status, cond.Reason, cond.Message = metav1.ConditionFalse, ReasonCompileFailed, compileErr.Error()
		if pp.Status.CompileError != compileErr.Error() {
			r.Recorder.Eventf(pp, nil, "Warning", ReasonCompileFailed, "Compile", "%s", compileErr.Error())
		}
		status.CompileError = compileErr.Error()
		logger.Info("policy failed to compile", "policy", pp.Name, "error", compileErr.Error())
	} else {
		if pp.Status.CompiledGeneration != pp.Generation {
			r.Recorder.Eventf(pp, nil, "Normal", ReasonCompiled, "Compile", "generation %d compiled", pp.Generation)
		}
		status.CompiledGeneration = pp.Generation
		status.CompileError = ""
	}
	meta.SetStatusCondition(&status.Conditions, cond)
	if err := r.patchStatus(ctx, pp, status); err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{}, nil
}

func (r *PolicyReconciler) compile(ctx context.Context, pp *joinerv1alpha1.ProvisioningPolicy) error {
	p, err := policyobject.ToPolicy(pp)
	if err != nil {
		// An unusable spec must not leave an older version enforced silently: drop it.
		r.Engine.RemovePolicy(pp.Name)
		return fmt.Errorf("spec: %w", err)
	}
	if err := r.Engine.UpsertPolicy(ctx, p); err != nil {
		var ce policy.CompileErrors
		if errors.As(err, &ce) {
			if e, ok := ce[pp.Name]; ok {
				return e
			}
		}
		return err
	}
	return nil
}

func (r *PolicyReconciler) patchStatus(ctx context.Context, pp *joinerv1alpha1.ProvisioningPolicy, status *joinerv1alpha1.ProvisioningPolicyStatus) error {
	patch := client.MergeFrom(pp.DeepCopy())
	pp.Status = *status
	if err := r.Client.Status().Patch(ctx, pp, patch); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("update status of provisioningpolicy %s: %w", pp.Name, err)
	}
	return nil
}

func (r *PolicyReconciler) setSynced(name string, generation int64, present bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.synced == nil {
		r.synced = map[string]int64{}
	}
	if present {
		r.synced[name] = generation
	} else {
		delete(r.synced, name)
	}
}

func (r *PolicyReconciler) changed() {
	if r.OnChange != nil {
		r.OnChange()
	}
}

// Synced reports whether the engine holds the current generation of every ProvisioningPolicy in
// the cluster that is not being deleted. It backs the readiness check: a replica must not admit requests with a stale or
// missing policy set.
func (r *PolicyReconciler) Synced(ctx context.Context, reader client.Reader) error {
	list := &joinerv1alpha1.ProvisioningPolicyList{}
	if err := reader.List(ctx, list); err != nil {
		return fmt.Errorf("list provisioningpolicies: %w", err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, pp := range list.Items {
		if !pp.DeletionTimestamp.IsZero() {
			// Reconcile removed it from the engine on purpose; a finalizer may keep it listed for long.
			continue
		}
		if g, ok := r.synced[pp.Name]; !ok || g != pp.Generation {
			return fmt.Errorf("policy %s generation %d is not compiled yet", pp.Name, pp.Generation)
		}
	}
	return nil
}
