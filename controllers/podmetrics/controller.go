// Package podmetrics publishes karpenter_pods_state: one series of value 1 per pod, labelled with
// the pod's phase and readiness and with the labels of the Node it is bound to (NodePool, zone,
// architecture, capacity type, instance type). The series are computed from the manager's cache
// when the metrics are scraped, on the leader only: nothing per pod is kept between scrapes, and no
// pod or Node update wakes anything.
package podmetrics

import (
	"context"
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// ControllerName is the name of the pod metrics controller (logs).
const ControllerName = "metrics.pod"

// scrapeTimeout bounds the listing of one scrape.
const scrapeTimeout = 10 * time.Second

// Controller is the source of karpenter_pods_state while it leads. It runs on the leader only, like
// every controller whose metrics describe the cluster.
type Controller struct {
	kube    client.Reader
	metrics *Metrics
}

// NewController returns the pod metrics controller. kube should be a manager's cached client; reg
// receives the metric (nil skips registration).
func NewController(kube client.Reader, reg prometheus.Registerer) (*Controller, error) {
	m, err := NewMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("pod metrics: %w", err)
	}
	return &Controller{kube: kube, metrics: m}, nil
}

// SetupWithManager adds the controller to mgr as a leader-only runnable.
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.Add(c); err != nil {
		return fmt.Errorf("set up %s controller: %w", ControllerName, err)
	}
	return nil
}

// NeedLeaderElection makes the series the leader's only.
func (c *Controller) NeedLeaderElection() bool { return true }

// Start publishes the series from this controller until ctx ends.
func (c *Controller) Start(ctx context.Context) error {
	c.metrics.State.publishFrom(c)
	<-ctx.Done()
	if prev := c.metrics.State.publishFrom(nil); prev != c {
		c.metrics.State.publishFrom(prev) // another controller took over meanwhile
	}
	return nil
}

// collect lists the pods and Nodes (read-only, without copying the cache's objects) and emits each
// pod's label values.
func (c *Controller) collect(emit func(values []string)) error {
	ctx, cancel := context.WithTimeout(context.Background(), scrapeTimeout)
	defer cancel()
	pods := &corev1.PodList{}
	if err := c.kube.List(ctx, pods, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("list pods: %w", err)
	}
	nodes := &corev1.NodeList{}
	if err := c.kube.List(ctx, nodes, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("list nodes: %w", err)
	}
	byName := make(map[string]*corev1.Node, len(nodes.Items))
	for i := range nodes.Items {
		byName[nodes.Items[i].Name] = &nodes.Items[i]
	}
	values := make([]string, len(stateLabels))
	for i := range pods.Items {
		pod := &pods.Items[i]
		stateValues(values, pod, byName[pod.Spec.NodeName])
		emit(values)
	}
	return nil
}

// stateValues fills values with the pod's label values, in stateLabels' order; node is the Node it
// is bound to (nil when it is not bound, or the Node is not known). The owner is the pod's
// controller as "Kind/name" ("" when it has none); ready is "true" when the pod's Ready condition is
// True, else "false".
func stateValues(values []string, pod *corev1.Pod, node *corev1.Node) {
	owner := ""
	if ref := metav1.GetControllerOf(pod); ref != nil {
		owner = ref.Kind + "/" + ref.Name
	}
	ready := "false"
	for _, cond := range pod.Status.Conditions {
		if cond.Type == corev1.PodReady && cond.Status == corev1.ConditionTrue {
			ready = "true"
		}
	}
	var nodeLabels map[string]string
	if node != nil {
		nodeLabels = node.Labels
	}
	copy(values, []string{pod.Name, pod.Namespace, owner, pod.Spec.NodeName, nodeLabels[karpv1.NodePoolLabelKey],
		nodeLabels[corev1.LabelTopologyZone], nodeLabels[corev1.LabelArchStable], nodeLabels[karpv1.CapacityTypeLabelKey],
		nodeLabels[corev1.LabelInstanceTypeStable], string(pod.Status.Phase), ready})
}
