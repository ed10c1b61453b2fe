package webhooks_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/audit"
	"github.com/joiner-dev/joiner/controllers/provisioning"
	"github.com/joiner-dev/joiner/e2e/framework"
	"github.com/joiner-dev/joiner/operator"
	"github.com/joiner-dev/joiner/tenancy"
)

// TestTenancySurvivesWebhookOutage is issue 13's story: the Pod webhooks fail open, so while they are
// unavailable a team-a Pod that selects and tolerates team-b's NodePool is admitted. Once they are back,
// Joiner still keeps tenancy: no team-b node is ever launched for the Pod, which stays pending with an
// Event saying why, and the audit reports it in its metrics and Events. A team-a Pod that merely
// tolerates team-b's taint gets a node of team-a's own NodePool.
func TestTenancySurvivesWebhookOutage(t *testing.T) {
	ctx := context.Background()
	const ns, poolA, poolB = "e2e-outage-a", "e2e-outage-a", "e2e-outage-b"
	// Each team's NodePool taints its nodes; its limit and label satisfy the policies other tests install.
	tainted := func(value string) func(*karpv1.NodePool) {
		return func(np *karpv1.NodePool) {
			np.Labels = map[string]string{"joiner.dev/team": "team-" + value}
			np.Spec.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10")}
			np.Spec.Template.Spec.Taints = []karpv1.Taint{{Key: "e2e-tenant", Value: value, Effect: corev1.TaintEffectNoSchedule}}
		}
	}
	cluster.NodePool(t, poolA, framework.OnDemandC("2"), tainted("a"))
	cluster.NodePool(t, poolB, framework.OnDemandC("2"), tainted("b"))
	bindNamespace(t, ns, poolA)

	// The outage: the Pod webhook configurations are gone (the documented emergency step), so the
	// apiserver admits Pods without asking Joiner, as it does when Joiner is down (failurePolicy Ignore).
	tolerate := func(value string) corev1.Toleration {
		return corev1.Toleration{Key: "e2e-tenant", Operator: corev1.TolerationOpEqual, Value: value, Effect: corev1.TaintEffectNoSchedule}
	}
	stealing := tenantPod(ns, "steal", map[string]string{karpv1.NodePoolLabelKey: poolB}, tolerate("b"))
	restore := removePodWebhooks(t, stealing)
	steal := createPod(t, stealing)
	tolerant := createPod(t, tenantPod(ns, "tolerant", nil, tolerate("a"), tolerate("b")))
	restore()

	// From now on, no node of team-b's NodePool may exist: sample it until the end of the test.
	noTeamBNode := framework.Sample(func(ctx context.Context) string {
		claims := &karpv1.NodeClaimList{}
		if err := c.List(ctx, claims, client.MatchingLabels{karpv1.NodePoolLabelKey: poolB}); err != nil {
			return ""
		}
		if len(claims.Items) > 0 {
			return fmt.Sprintf("NodeClaim %s of %s was launched", claims.Items[0].Name, poolB)
		}
		return ""
	})
	sampled := false
	finishSampling := func() {
		if !sampled {
			sampled = true
			noTeamBNode.Finish(t, "no node of "+poolB+" for team-a's Pods")
		}
	}
	t.Cleanup(finishSampling) // also when a wait below fails
	// No kube-scheduler runs in this package: mark the Pods Unschedulable as it would.
	markUnschedulable(t, steal)
	markUnschedulable(t, tolerant)

	// The provisioner explains why the Pod gets no node, and leaves it pending.
	waitForEvent(t, steal, tenancy.ReasonViolation, provisioning.ControllerName,
		fmt.Sprintf("no capacity is launched for this pod in NodePool %s: namespace %q is bound to %s only: spec.nodeSelector[karpenter.sh/nodepool]: NodePool %s is not bound", poolB, ns, poolA, poolB))
	waitForEvent(t, steal, provisioning.ReasonFailedProvisioning, provisioning.ControllerName, "")
	// The Pod that only tolerates team-b's taint is planned onto team-a's NodePool.
	waitForEvent(t, tolerant, provisioning.ReasonNominated, provisioning.ControllerName, "(NodePool "+poolA+")")

	// The audit reports both Pods: an Event on each, a count on the namespace, and the metric.
	waitForEvent(t, steal, tenancy.ReasonViolation, audit.ControllerName, "spec.tolerations[0]: tolerates e2e-tenant=b:NoSchedule")
	waitForEvent(t, tolerant, tenancy.ReasonViolation, audit.ControllerName, "spec.tolerations[1]: tolerates e2e-tenant=b:NoSchedule")
	waitForEvent(t, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, audit.ReasonTenancyViolations, audit.ControllerName,
		"audit found 3 violation(s) of this namespace's NodePool tenancy")
	framework.Eventually(t, 30*time.Second, "joiner_audit_violations to count the Pods' violations", func(ctx context.Context) (bool, error) {
		v, ok := scrapeGauge(ctx, t, "joiner_audit_violations", `policy="`+audit.TenancyPolicy+`"`)
		return ok && v >= 3, nil
	})

	finishSampling()
	if err := c.Get(ctx, client.ObjectKeyFromObject(steal), steal); err != nil {
		t.Fatal(err)
	}
	if steal.Spec.NodeName != "" || steal.Status.NominatedNodeName != "" {
		t.Errorf("the cross-tenant Pod was not left pending: nodeName %q, nominatedNodeName %q", steal.Spec.NodeName, steal.Status.NominatedNodeName)
	}
}

// bindNamespace creates the namespace, bound to the NodePools, and deletes it when the test ends.
func bindNamespace(t *testing.T, name string, pools ...string) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name,
		Labels:      map[string]string{tenancy.BoundLabel: tenancy.BoundLabelValue},
		Annotations: map[string]string{tenancy.NodePoolsAnnotation: strings.Join(pools, ",")}}}
	if err := c.Create(context.Background(), ns); err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := c.Delete(context.Background(), ns); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete namespace %s: %v", name, err)
		}
	})
	waitFor(t, 30*time.Second, "the default service account in "+name, func(ctx context.Context) (bool, error) {
		return c.Get(ctx, client.ObjectKey{Namespace: name, Name: "default"}, &corev1.ServiceAccount{}) == nil, nil
	})
}

// removePodWebhooks deletes the Pod tenancy webhook configurations and waits until the apiserver
// admits the cross-tenant Pod, unchanged, without asking Joiner. It returns the function that creates
// them again and waits until that Pod is denied again (also called when the test ends, if it was not).
func removePodWebhooks(t *testing.T, crossTenant *corev1.Pod) (restore func()) {
	t.Helper()
	ctx := context.Background()
	key := client.ObjectKey{Name: operator.PodTenancyWebhookConfigurationName}
	mutating := &admissionregistrationv1.MutatingWebhookConfiguration{}
	validating := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	for _, obj := range []client.Object{mutating, validating} {
		if err := c.Get(ctx, key, obj); err != nil {
			t.Fatalf("read the Pod webhook configuration: %v", err)
		}
		if err := c.Delete(ctx, obj); err != nil {
			t.Fatalf("delete the Pod webhook configuration: %v", err)
		}
	}
	// Dry runs go through the admission webhooks like real requests: wait until neither is called (the
	// mutating one would add tolerations of the namespace's own NodePool's taints; the apiserver's
	// DefaultTolerationSeconds plugin adds others, with no value).
	waitFor(t, 30*time.Second, "the apiserver to stop calling the Pod webhooks", func(ctx context.Context) (bool, error) {
		probe := crossTenant.DeepCopy()
		if err := c.Create(ctx, probe, client.DryRunAll); err != nil {
			return false, nil
		}
		for _, tol := range probe.Spec.Tolerations {
			if tol.Value != "" && !slices.Contains(crossTenant.Spec.Tolerations, tol) {
				return false, nil
			}
		}
		return true, nil
	})
	restored := false
	restore = func() {
		if restored {
			return
		}
		restored = true
		for _, obj := range []client.Object{mutating, validating} {
			obj.SetResourceVersion("")
			obj.SetUID("")
			if err := c.Create(ctx, obj); err != nil {
				t.Errorf("restore the Pod webhook configuration: %v", err)
			}
		}
		waitFor(t, 30*time.Second, "the Pod webhooks to deny the cross-tenant Pod again", func(ctx context.Context) (bool, error) {
			err := c.Create(ctx, crossTenant.DeepCopy(), client.DryRunAll)
			return err != nil && strings.Contains(err.Error(), "is not bound to namespace"), nil
		})
	}
	t.Cleanup(restore)
	return restore
}

// createPod creates the Pod and deletes it when the test ends.
func createPod(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	created := pod.DeepCopy()
	if err := c.Create(context.Background(), created); err != nil {
		t.Fatalf("create pod %s: %v", pod.Name, err)
	}
	t.Cleanup(func() {
		if err := c.Delete(context.Background(), created); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete pod %s: %v", created.Name, err)
		}
	})
	return created
}

// tenantPod returns a Pod requesting 100m CPU with the node selector and tolerations.
func tenantPod(ns, name string, selector map[string]string, tolerations ...corev1.Toleration) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{NodeSelector: selector, Tolerations: tolerations, TerminationGracePeriodSeconds: ptr.To[int64](0),
			Containers: []corev1.Container{{Name: "c", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}}}}}}
}

// markUnschedulable sets the PodScheduled=False (Unschedulable) condition kube-scheduler sets on a Pod
// it cannot place, which is what the provisioner acts on.
func markUnschedulable(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	orig := pod.DeepCopy()
	pod.Status.Conditions = append(pod.Status.Conditions, corev1.PodCondition{Type: corev1.PodScheduled, Status: corev1.ConditionFalse,
		Reason: corev1.PodReasonUnschedulable, Message: "0/0 nodes are available", LastTransitionTime: metav1.Now()})
	if err := c.Status().Patch(context.Background(), pod, client.MergeFrom(orig)); err != nil {
		t.Fatalf("mark pod %s Unschedulable: %v", pod.Name, err)
	}
}

// waitForEvent waits up to a minute for an Event about obj, with the reason, from the controller, whose
// message contains text.
func waitForEvent(t *testing.T, obj client.Object, reason, controller, text string) {
	t.Helper()
	framework.Eventually(t, time.Minute, fmt.Sprintf("a %s Event from %s on %s containing %q", reason, controller, obj.GetName(), text),
		func(ctx context.Context) (bool, error) {
			events := &corev1.EventList{}
			if err := c.List(ctx, events); err != nil {
				return false, nil
			}
			for _, e := range events.Items {
				if e.InvolvedObject.Name == obj.GetName() && e.InvolvedObject.Namespace == obj.GetNamespace() &&
					e.Reason == reason && e.ReportingController == controller && strings.Contains(e.Message, text) {
					return true, nil
				}
			}
			return false, nil
		})
}

// scrapeGauge reads Joiner's metrics endpoint and returns the value of the sample of the named metric
// whose labels contain label.
func scrapeGauge(ctx context.Context, t *testing.T, name, label string) (float64, bool) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, cluster.Joiner.MetricsURL, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, false
	}
	defer func() { _, _ = io.Copy(io.Discard, resp.Body); _ = resp.Body.Close() }()
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		line := lines.Text()
		if !strings.HasPrefix(line, name+"{") || !strings.Contains(line, label) {
			continue
		}
		fields := strings.Fields(line)
		v, err := strconv.ParseFloat(fields[len(fields)-1], 64)
		return v, err == nil
	}
	return 0, false
}
