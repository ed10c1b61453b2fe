package audit

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/podpredicates"
	"github.com/joiner-dev/joiner/policy"
	"github.com/joiner-dev/joiner/tenancy"
)

// TenancyPolicy is the policy label of joiner_audit_violations for the built-in NodePool tenancy
// rule (package tenancy). No ProvisioningPolicy can be named so: names cannot contain a slash.
const TenancyPolicy = "joiner.dev/pod-tenancy"

// ReasonTenancyViolations is the reason of the Event on a bound Namespace whose count of tenancy
// violations changed.
const ReasonTenancyViolations = "TenancyViolations"

// tenancyReport is what a run found about the built-in tenancy rule; the next run reports changes
// against it.
type tenancyReport struct {
	// byPod holds the messages reported on each violating Pod.
	byPod map[types.UID]string
	// byNamespace counts the violations of each bound Namespace.
	byNamespace map[string]int
}

// auditTenancy checks every Pod that is not terminal, in a Namespace bound to NodePools, against the
// tenancy rule the Pod webhooks enforce at admission, which fail open: its node selection and
// tolerations (tenancy.Check) and, once bound, its node's NodePool (tenancy.Placement). It reports
// the violations as the ProvisioningPolicies' are: the joiner_audit_violations gauge (policy
// TenancyPolicy, action Deny) while some Namespace is bound, an Event on each violating Pod when its
// violations change, and an Event on the Namespace when its count changes.
func (a *Auditor) auditTenancy(ctx context.Context, namespaces []corev1.Namespace, pods []corev1.Pod, nodePools []karpv1.NodePool) error {
	bindings := map[string][]string{}
	for i := range namespaces {
		if pools := tenancy.BoundNodePools(&namespaces[i]); len(pools) > 0 {
			bindings[namespaces[i].Name] = pools
		}
	}
	if len(bindings) == 0 {
		a.tenancy = tenancyReport{}
		return nil
	}
	nodePoolOf, err := a.nodePools(ctx)
	if err != nil {
		return err
	}
	next := tenancyReport{byPod: map[types.UID]string{}, byNamespace: map[string]int{}}
	total := 0
	for i := range pods {
		pod := &pods[i]
		bound, ok := bindings[pod.Namespace]
		if !ok || podpredicates.IsTerminal(pod) {
			continue
		}
		violations := tenancy.Check(pod.Namespace, bound, pod, nodePools)
		if pod.Spec.NodeName != "" {
			if v, broken := tenancy.Placement(pod.Namespace, bound, pod, nodePoolOf[pod.Spec.NodeName]); broken {
				violations = append(violations, v)
			}
		}
		if len(violations) == 0 {
			continue
		}
		var messages []string
		for _, v := range violations {
			messages = append(messages, v.Message)
		}
		total += len(violations)
		note := strings.Join(messages, "; ")
		next.byPod[pod.UID] = note
		next.byNamespace[pod.Namespace] += len(violations)
		if a.tenancy.byPod[pod.UID] != note {
			a.Log.Info("pod breaks the NodePool tenancy of its namespace", "pod", client.ObjectKeyFromObject(pod).String(),
				"bound", bound, "violations", len(violations))
			a.event(pod, corev1.EventTypeWarning, tenancy.ReasonViolation, "audit: the pod breaks the NodePool tenancy of namespace %q (bound to %s): %s",
				pod.Namespace, strings.Join(bound, ", "), note)
		}
	}
	for i := range namespaces {
		ns := &namespaces[i]
		if _, ok := bindings[ns.Name]; !ok {
			continue
		}
		count, prev := next.byNamespace[ns.Name], a.tenancy.byNamespace[ns.Name]
		if count == prev {
			continue
		}
		kind := corev1.EventTypeNormal
		if count > 0 {
			kind = corev1.EventTypeWarning
		}
		a.event(ns, kind, ReasonTenancyViolations, "audit found %d violation(s) of this namespace's NodePool tenancy (was %d)", count, prev)
	}
	a.tenancy = next
	if a.Metric != nil {
		a.Metric.Violations.WithLabelValues(TenancyPolicy, string(policy.ActionDeny)).Set(float64(total))
	}
	return nil
}

// nodePools maps the name of every Node to its NodePool (its karpenter.sh/nodepool label).
func (a *Auditor) nodePools(ctx context.Context) (map[string]string, error) {
	nodes := &corev1.NodeList{}
	if err := a.Client.List(ctx, nodes); err != nil {
		return nil, fmt.Errorf("audit: list nodes for NodePool tenancy: %w", err)
	}
	out := make(map[string]string, len(nodes.Items))
	for i := range nodes.Items {
		out[nodes.Items[i].Name] = nodes.Items[i].Labels[karpv1.NodePoolLabelKey]
	}
	return out, nil
}

// maxEventNote is the longest Event note the audit records (the Events API allows 1 kB).
const maxEventNote = 1000

// event records an Event about obj when the Auditor has a Recorder, its note cut to maxEventNote.
func (a *Auditor) event(obj client.Object, kind, reason, format string, args ...any) {
	if a.Recorder == nil {
		return
	}
	note := fmt.Sprintf(format, args...)
	if len(note) > maxEventNote {
		note = note[:maxEventNote-3] + "..."
	}
	a.Recorder.Eventf(obj, nil, kind, reason, "Audit", "%s", note)
}
