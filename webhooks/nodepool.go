package webhooks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/runtimevalidation"
)

// templateChecks are the semantic checks of NodePools and NodeClaims: the parts of their validation that
// CRD CEL cannot express because they need a cron parser, set reasoning over requirements, the instance
// type catalog or other objects, plus the runtime validation (package runtimevalidation) that the
// NodePool status controller also applies to objects that never passed this webhook.
type templateChecks struct {
	reader        client.Reader
	instanceTypes InstanceTypeLister
}

// nodePool checks a NodePool:
//   - every budget schedule is a cron expression (denial);
//   - the template passes runtime validation (package runtimevalidation: label keys and values,
//     requirement keys, values, operators and minValues, taint keys and values, duplicate taints),
//     the checks whose failure the NodePool status controller reports as ValidationSucceeded=False
//     (denial);
//   - when it does, labels and requirements do not contradict each other, and some instance type
//     satisfies them (denial);
//   - the node class of nodeClassRef exists (warning);
//   - no limit is below the NodePool's current usage (warning).
func (t *templateChecks) nodePool(ctx context.Context, req *Request, obj *Object) (findings, error) {
	var f findings
	np, err := typedView[karpv1.NodePool](obj)
	if err != nil {
		return f, fmt.Errorf("decode NodePool %q: %w", req.Name, err)
	}
	for _, msg := range budgetFindings(np.Spec.Disruption.Budgets) {
		f.deny(msg)
	}
	tpl := &np.Spec.Template
	if !f.denyAll(runtimevalidation.NodePool(np)) {
		cs := constraintsOf("spec.template.metadata.labels", tpl.Labels, "spec.template.spec.requirements", tpl.Spec.Requirements)
		f.add(t.requirementFindings(ctx, np, cs, "spec.template.spec.requirements"))
	}
	f.add(t.nodeClassFindings(ctx, "spec.template.spec.nodeClassRef", tpl.Spec.NodeClassRef, "the NodePool stays NotReady"))
	usageOf := obj
	if len(np.Status.Resources) == 0 && req.Old != nil {
		// The new object of an update may come without status; the usage is the old one's.
		usageOf = req.Old
	}
	// Request.decode has decoded both maps already.
	content, err := obj.Content()
	usage, usageErr := usageOf.Content()
	if err == nil && usageErr == nil {
		for _, msg := range limitFindings(content, usage) {
			f.warn(msg)
		}
	}
	return f, nil
}

// nodeClaim checks a NodeClaim created by hand (Joiner's own NodeClaims are exempt): runtime validation
// of its requirements and taints, then contradicting or unsatisfiable requirements and labels (denials),
// and a missing node class (warning).
func (t *templateChecks) nodeClaim(ctx context.Context, req *Request, obj *Object) (findings, error) {
	var f findings
	nc, err := typedView[karpv1.NodeClaim](obj)
	if err != nil {
		return f, fmt.Errorf("decode NodeClaim %q: %w", req.Name, err)
	}
	if !f.denyAll(runtimevalidation.NodeClaim(nc)) {
		cs := constraintsOf("metadata.labels", nc.Labels, "spec.requirements", nc.Spec.Requirements)
		f.add(t.requirementFindings(ctx, nodePoolOf(nc), cs, "spec.requirements"))
	}
	f.add(t.nodeClassFindings(ctx, "spec.nodeClassRef", nc.Spec.NodeClassRef, "the NodeClaim cannot launch"))
	return f, nil
}

// nodePoolOf describes a NodeClaim as the NodePool it would belong to, for the instance-type lister,
// which works on NodePools.
func nodePoolOf(nc *karpv1.NodeClaim) *karpv1.NodePool {
	np := &karpv1.NodePool{}
	np.Name = nc.Labels[karpv1.NodePoolLabelKey]
	np.Spec.Template.Labels = nc.Labels
	np.Spec.Template.Spec = karpv1.NodeClaimTemplateSpec{
		Taints:                 nc.Spec.Taints,
		StartupTaints:          nc.Spec.StartupTaints,
		Requirements:           nc.Spec.Requirements,
		NodeClassRef:           nc.Spec.NodeClassRef,
		TerminationGracePeriod: nc.Spec.TerminationGracePeriod,
		ExpireAfter:            nc.Spec.ExpireAfter,
	}
	return np
}

// requirementFindings denies contradicting constraints and, when they are consistent, constraints no
// instance type of the catalog satisfies.
func (t *templateChecks) requirementFindings(ctx context.Context, np *karpv1.NodePool, cs []constraint, requirementsField string) findings {
	var f findings
	if msgs := contradictions(cs); len(msgs) > 0 {
		f.denials = msgs
		return f
	}
	if t.instanceTypes == nil || len(cs) == 0 {
		return f
	}
	types, err := t.instanceTypes.InstanceTypes(ctx, np)
	if err != nil {
		f.warn(fmt.Sprintf("%s: not checked against the instance-type catalog: %v", requirementsField, err))
		return f
	}
	f.denials = catalogFindings(cs, types)
	return f
}

// budgetFindings reports budget schedules that are not cron expressions. Schedules are evaluated in UTC
// with the standard 5-field syntax or a descriptor (@yearly, @annually, @monthly, @weekly, @daily,
// @midnight, @hourly), like Karpenter's.
func budgetFindings(budgets []karpv1.Budget) []string {
	var out []string
	for i, b := range budgets {
		if b.Schedule == nil {
			continue
		}
		if reason := scheduleError(*b.Schedule); reason != "" {
			out = append(out, fmt.Sprintf("spec.disruption.budgets[%d].schedule: %q is not a valid cron expression (%s); use 5 fields: minute hour day-of-month month day-of-week",
				i, *b.Schedule, reason))
		}
	}
	return out
}

// scheduleError returns why s is not an accepted schedule, or "" when it is. It uses the parser of the
// budget math, so the webhook admits exactly the schedules that budgets evaluate.
func scheduleError(s string) string {
	_, err := karpv1.ParseBudgetSchedule(s)
	if err == nil {
		return ""
	}
	if se, ok := errors.AsType[*karpv1.BudgetScheduleError](err); ok {
		return se.Reason
	}
	return err.Error()
}

// denyAll denies every runtime-validation error, one line each, and reports whether there was any. The
// set reasoning over requirements (contradictions, the catalog) is skipped after such errors: it would
// only restate malformed constraints less clearly.
func (f *findings) denyAll(errs field.ErrorList) bool {
	for _, msg := range runtimevalidation.Messages(errs) {
		f.deny(msg)
	}
	return len(errs) > 0
}

// nodeClassFindings warns when the node class a nodeClassRef names cannot be found. It never denies: the
// node class may be applied right after the NodePool (a GitOps sync applies both in any order).
func (t *templateChecks) nodeClassFindings(ctx context.Context, field string, ref *karpv1.NodeClassReference, consequence string) findings {
	var f findings
	if ref == nil || ref.Name == "" || t.reader == nil {
		return f
	}
	var obj client.Object
	switch {
	case ref.Group == awsv1.Group && ref.Kind == ec2NodeClassKind:
		obj = &awsv1.EC2NodeClass{}
	case ref.Group == localNodeClassGroup && ref.Kind == localNodeClassKind:
		obj = &v1alpha1.LocalNodeClass{}
	default:
		f.warn(fmt.Sprintf("%s: %s in group %q is not a node class Joiner knows; use EC2NodeClass (%s) or LocalNodeClass (%s)",
			field, ref.Kind, ref.Group, awsv1.Group, localNodeClassGroup))
		return f
	}
	err := t.reader.Get(ctx, client.ObjectKey{Name: ref.Name}, obj)
	switch {
	case apierrors.IsNotFound(err):
		f.warn(fmt.Sprintf("%s: %s %q does not exist; create it, or %s", field, ref.Kind, ref.Name, consequence))
	case meta.IsNoMatchError(err):
		f.warn(fmt.Sprintf("%s: the %s CRD is not installed; install it, or %s", field, ref.Kind, consequence))
	case err != nil:
		f.warn(fmt.Sprintf("%s: could not look up %s %q: %v", field, ref.Kind, ref.Name, err))
	case obj.GetDeletionTimestamp() != nil:
		f.warn(fmt.Sprintf("%s: %s %q is being deleted; point nodeClassRef at another node class", field, ref.Kind, ref.Name))
	}
	return f
}

// limitFindings warns about limits (spec.limits of obj) below the current usage (status.resources of
// usageOf): no node launches until usage falls below them, which is rarely what lowering a limit was
// meant to do. Quantities are quoted as written, not in canonical form ("1000", not "1k").
func limitFindings(obj, usageOf map[string]any) []string {
	limits, _ := objectAt(obj, "spec", "limits")
	usage, _ := objectAt(usageOf, "status", "resources")
	if len(limits) == 0 || len(usage) == 0 {
		return nil
	}
	names := make([]string, 0, len(limits))
	for name := range limits {
		names = append(names, name)
	}
	slices.Sort(names)
	var out []string
	for _, name := range names {
		limitText, limit, ok := quantityOf(limits[name])
		if !ok {
			continue
		}
		usedText, used, ok := quantityOf(usage[name])
		if ok && used.Cmp(limit) > 0 {
			out = append(out, fmt.Sprintf("spec.limits.%s: %s is below current usage %s; no new nodes launch until usage drops below it",
				name, limitText, usedText))
		}
	}
	return out
}

// quantityOf parses a quantity of a decoded object, a string ("100Gi") or a number (1000), and returns
// it as written: a number is quoted as its JSON.
func quantityOf(v any) (string, resource.Quantity, bool) {
	var text string
	switch v := v.(type) {
	case string:
		text = v
	case json.Number, int64, float64:
		b, err := json.Marshal(v)
		if err != nil {
			return "", resource.Quantity{}, false
		}
		text = string(b)
	default:
		return "", resource.Quantity{}, false
	}
	q, err := resource.ParseQuantity(text)
	if err != nil {
		return "", resource.Quantity{}, false
	}
	return text, q, true
}
