// Package nodeclaimgate is the one way Joiner creates a NodeClaim: the provisioner's launches,
// disruption's replacements (consolidation, drift, soft expiry) and static NodePools' replicas all
// go through Gate.Create. Before the NodeClaim is created, the gate checks the NodePool tenancy
// rule (package tenancy) once more against the namespaces as read now: a NodeClaim of a NodePool
// that the namespace of a pod it is for is not bound to is refused, with an Event on each such pod
// (reason tenancy.ReasonViolation), a log entry and joiner_tenancy_refused_nodeclaims_total.
//
// The simulations already keep such pods off other tenants' NodePools (state.Tenancy); the gate is
// the last check, should one of them not. It plans nothing and changes nothing but the NodeClaim it
// is asked to create.
package nodeclaimgate

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/state"
	"github.com/joiner-dev/joiner/tenancy"
)

// ErrRefused is wrapped by the error of Create when the tenancy rule refused the NodeClaim; it
// was not created, and creating it again for the same pods would be refused again.
var ErrRefused = errors.New("NodeClaim refused by NodePool tenancy")

// maxEventNote is the longest Event note the gate records (the Events API allows 1 kB).
const maxEventNote = 1000

// Gate creates NodeClaims for one controller. It is safe for concurrent use.
type Gate struct {
	kube       client.Client
	recorder   events.EventRecorder
	log        logr.Logger
	controller string
	metrics    *Metrics
}

// New returns the gate of the controller named controller (the controller label of its metric),
// creating through kube, which also reads the namespaces. recorder (nil records nothing) records
// the Events on refused pods; log receives the refusals (a logger without a sink means the
// logger of each Create's context). reg receives the metric (nil skips it).
func New(kube client.Client, recorder events.EventRecorder, log logr.Logger, reg prometheus.Registerer, controller string) (*Gate, error) {
	m, err := NewMetrics(reg)
	if err != nil {
		return nil, fmt.Errorf("nodeclaim gate metrics: %w", err)
	}
	return &Gate{kube: kube, recorder: recorder, log: log, controller: controller, metrics: m}, nil
}

// Create creates nc, a NodeClaim for pods (none for a static NodePool's), unless the tenancy rule
// refuses it: then it records why on every pod of a namespace that is not bound to nc's NodePool
// (karpenter.sh/nodepool label), counts the refusal and returns an error wrapping ErrRefused. A
// namespace that cannot be read refuses nothing and creates nothing: the error says which one.
// The error of the create itself is returned as the client gave it.
func (g *Gate) Create(ctx context.Context, nc *karpv1.NodeClaim, pods []*corev1.Pod) error {
	pool := nc.Labels[karpv1.NodePoolLabelKey]
	tenants, err := g.readTenancy(ctx, pods)
	if err != nil {
		return fmt.Errorf("NodeClaim of NodePool %s not created: %w", pool, err)
	}
	if refused := tenants.Refused(pool, pods); len(refused) > 0 {
		return g.refuse(ctx, pool, refused, tenants)
	}
	return g.kube.Create(ctx, nc)
}

// readTenancy reads the namespaces of pods; a namespace that does not exist binds nothing.
func (g *Gate) readTenancy(ctx context.Context, pods []*corev1.Pod) (*state.Tenancy, error) {
	var names []string
	for _, pod := range pods {
		if !slices.Contains(names, pod.Namespace) {
			names = append(names, pod.Namespace)
		}
	}
	namespaces := make([]corev1.Namespace, 0, len(names))
	for _, name := range names {
		ns := corev1.Namespace{}
		if err := g.kube.Get(ctx, client.ObjectKey{Name: name}, &ns); err != nil {
			if apierrors.IsNotFound(err) {
				continue
			}
			return nil, fmt.Errorf("read namespace %q for its NodePool tenancy (%s): %w", name, tenancy.NodePoolsAnnotation, err)
		}
		namespaces = append(namespaces, ns)
	}
	return state.NewTenancy(namespaces, nil), nil
}

// refuse reports a refused NodeClaim of pool: an Event on each refused pod, the audit log entry and
// the metric. It returns the error Create returns.
func (g *Gate) refuse(ctx context.Context, pool string, refused []*corev1.Pod, tenants *state.Tenancy) error {
	g.metrics.Refused.WithLabelValues(g.controller, pool).Inc()
	keys := make([]string, len(refused))
	for i, pod := range refused {
		keys[i] = client.ObjectKeyFromObject(pod).String()
		bound := tenants.Bound(pod.Namespace)
		g.event(pod, "refused to create a NodeClaim of NodePool %s for this pod: namespace %q is bound to %s only (%s)",
			pool, pod.Namespace, strings.Join(bound, ", "), tenancy.NodePoolsAnnotation)
	}
	log := g.log
	if log.GetSink() == nil {
		log = logr.FromContextOrDiscard(ctx)
	}
	log.Info("audit: refused a NodeClaim that breaks NodePool tenancy", "controller", g.controller, "nodepool", pool, "pods", keys)
	return fmt.Errorf("%w: NodePool %s is not bound to the namespace of pod(s) %s; bind it in their namespace's %s annotation or keep them off it",
		ErrRefused, pool, strings.Join(keys, ", "), tenancy.NodePoolsAnnotation)
}

// event records a Warning Event (reason tenancy.ReasonViolation) on the pod, its note cut to
// maxEventNote.
func (g *Gate) event(pod *corev1.Pod, format string, args ...any) {
	if g.recorder == nil {
		return
	}
	note := fmt.Sprintf(format, args...)
	if len(note) > maxEventNote {
		note = note[:maxEventNote-3] + "..."
	}
	g.recorder.Eventf(pod, nil, corev1.EventTypeWarning, tenancy.ReasonViolation, "Launch", "%s", note)
}
