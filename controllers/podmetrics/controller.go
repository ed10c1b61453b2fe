// Package podmetrics publishes karpenter_pods_state: one series of value 1 per pod, labelled with
// the pod's phase and readiness and with the labels of the Node it is bound to (NodePool, zone,
// architecture, capacity type, instance type). A pod's series is replaced when any of that
// changes, and removed when the pod is gone. It only reads the manager's cache.
package podmetrics

import (
	"context"
	"fmt"
	"maps"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/metrics"
)

// ControllerName is the name of the pod metrics controller (logs).
const ControllerName = "metrics.pod"

// Controller keeps karpenter_pods_state in step with the cluster's pods. It runs on the leader
// only, like every controller whose metrics describe the cluster.
type Controller struct {
	kube    client.Reader
	metrics *Metrics

	mu sync.Mutex
	// published holds the labels of each pod's series.
	published map[types.NamespacedName]prometheus.Labels
	// onNode holds the pods published with each node, so that a Node's label change reaches them.
	onNode map[string]sets.Set[types.NamespacedName]
}

// NewController returns the pod metrics controller. kube should be a manager's cached client; reg
// receives the metric (nil skips registration).
func NewController(kube client.Reader, reg prometheus.Registerer) (*Controller, error) {
	m, err := NewMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("pod metrics: %w", err)
	}
	return &Controller{kube: kube, metrics: m, published: map[types.NamespacedName]prometheus.Labels{},
		onNode: map[string]sets.Set[types.NamespacedName]{}}, nil
}

// SetupWithManager watches Pods, and Nodes whose labels change, with mgr.
func (c *Controller) SetupWithManager(mgr ctrl.Manager) error {
	err := ctrl.NewControllerManagedBy(mgr).
		Named(ControllerName).
		For(&corev1.Pod{}).
		Watches(&corev1.Node{}, handler.EnqueueRequestsFromMapFunc(c.podsOnNode),
			builder.WithPredicates(predicate.LabelChangedPredicate{})).
		Complete(c)
	if err != nil {
		return fmt.Errorf("set up %s controller: %w", ControllerName, err)
	}
	return nil
}

// Reconcile publishes the pod's current series, or removes it when the pod is gone.
func (c *Controller) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	pod := &corev1.Pod{}
	if err := c.kube.Get(ctx, req.NamespacedName, pod); err != nil {
		if apierrors.IsNotFound(err) {
			c.forget(req.NamespacedName)
			return reconcile.Result{}, nil
		}
		return reconcile.Result{}, fmt.Errorf("get pod %s: %w", req.NamespacedName, err)
	}
	var node *corev1.Node
	if pod.Spec.NodeName != "" {
		node = &corev1.Node{}
		if err := c.kube.Get(ctx, client.ObjectKey{Name: pod.Spec.NodeName}, node); err != nil {
			if !apierrors.IsNotFound(err) {
				return reconcile.Result{}, fmt.Errorf("get node %s of pod %s: %w", pod.Spec.NodeName, req.NamespacedName, err)
			}
			node = nil
		}
	}
	c.publish(req.NamespacedName, stateLabels(pod, node))
	return reconcile.Result{}, nil
}

// publish makes labels the pod's only series.
func (c *Controller) publish(key types.NamespacedName, labels prometheus.Labels) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.published[key]; ok {
		if maps.Equal(old, labels) {
			return
		}
		c.removeLocked(key, old)
	}
	c.metrics.State.With(labels).Set(1)
	c.published[key] = labels
	if node := labels[metrics.NodeLabel]; node != "" {
		if c.onNode[node] == nil {
			c.onNode[node] = sets.New[types.NamespacedName]()
		}
		c.onNode[node].Insert(key)
	}
}

// forget removes the pod's series.
func (c *Controller) forget(key types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if old, ok := c.published[key]; ok {
		c.removeLocked(key, old)
	}
}

func (c *Controller) removeLocked(key types.NamespacedName, labels prometheus.Labels) {
	c.metrics.State.Delete(labels)
	delete(c.published, key)
	if node := labels[metrics.NodeLabel]; node != "" {
		c.onNode[node].Delete(key)
		if c.onNode[node].Len() == 0 {
			delete(c.onNode, node)
		}
	}
}

// podsOnNode maps a Node to the pods published as bound to it.
func (c *Controller) podsOnNode(_ context.Context, o client.Object) []reconcile.Request {
	c.mu.Lock()
	defer c.mu.Unlock()
	pods := c.onNode[o.GetName()]
	reqs := make([]reconcile.Request, 0, pods.Len())
	for key := range pods {
		reqs = append(reqs, reconcile.Request{NamespacedName: key})
	}
	return reqs
}

// stateLabels are the labels of the pod's series; node is the Node it is bound to (nil when it is
// not bound, or the Node is not known). The owner is the pod's controller as "Kind/name" ("" when
// it has none); ready is "true" when the pod's Ready condition is True, else "false".
func stateLabels(pod *corev1.Pod, node *corev1.Node) prometheus.Labels {
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
	return prometheus.Labels{
		metrics.NameLabel:         pod.Name,
		metrics.NamespaceLabel:    pod.Namespace,
		metrics.OwnerLabel:        owner,
		metrics.NodeLabel:         pod.Spec.NodeName,
		metrics.NodePoolLabel:     nodeLabels[karpv1.NodePoolLabelKey],
		metrics.ZoneLabel:         nodeLabels[corev1.LabelTopologyZone],
		metrics.ArchLabel:         nodeLabels[corev1.LabelArchStable],
		metrics.CapacityTypeLabel: nodeLabels[karpv1.CapacityTypeLabelKey],
		metrics.InstanceTypeLabel: nodeLabels[corev1.LabelInstanceTypeStable],
		metrics.PhaseLabel:        string(pod.Status.Phase),
		metrics.ReadyLabel:        ready,
	}
}
