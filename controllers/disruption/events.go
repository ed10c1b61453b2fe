package disruption

import (
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/clock"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/disruption/budget"
	"github.com/joiner-dev/joiner/controllers/disruption/planner"
	"github.com/joiner-dev/joiner/controllers/state"
)

// How long an event is not repeated for the same object, reason and message (Karpenter v1.14).
const (
	blockedTTL         = 2 * time.Minute
	unconsolidatedTTL  = 15 * time.Minute
	rejectedTTL        = 15 * time.Minute
	budgetBlockedTTL   = time.Minute
	maxDedupeEntries   = 100000
	eventActionDisrupt = "Disrupt"
)

// dedupe remembers when an event was last sent.
type dedupe struct {
	clock clock.Clock
	mu    sync.Mutex
	sent  map[string]time.Time
}

func newDedupe(clk clock.Clock) *dedupe {
	return &dedupe{clock: clk, sent: map[string]time.Time{}}
}

// allow reports whether the event with key may be sent now, and records it if so.
func (d *dedupe) allow(key string, ttl time.Duration) bool {
	now := d.clock.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if last, ok := d.sent[key]; ok && now.Sub(last) < ttl {
		return false
	}
	if len(d.sent) >= maxDedupeEntries {
		for k, t := range d.sent {
			if now.Sub(t) >= unconsolidatedTTL {
				delete(d.sent, k)
			}
		}
	}
	d.sent[key] = now
	return true
}

// event records an event on obj unless the same one was recorded within ttl.
func (c *Controller) event(obj client.Object, kind, reason string, ttl time.Duration, format string, args ...any) {
	if c.recorder == nil {
		return
	}
	note := fmt.Sprintf(format, args...)
	if !c.events.allow(string(obj.GetUID())+"/"+obj.GetName()+"/"+reason+"/"+note, ttl) {
		return
	}
	c.recorder.Eventf(obj.(runtime.Object), nil, kind, reason, eventActionDisrupt, "%s", note)
}

// objectsOf returns the Nodes and NodeClaims of the command's candidates, as state has them.
func (c *Controller) objectsOf(snapshot *state.ClusterState, cmd *planner.Command) []client.Object {
	names := map[string]bool{}
	for _, cand := range cmd.Candidates {
		names[cand.Name()] = true
	}
	var out []client.Object
	for i := range snapshot.Nodes {
		if names[snapshot.Nodes[i].Name] {
			out = append(out, &snapshot.Nodes[i])
		}
	}
	for i := range snapshot.NodeClaims {
		if names[snapshot.NodeClaims[i].Status.NodeName] {
			out = append(out, &snapshot.NodeClaims[i])
		}
	}
	return out
}

// observe publishes a pass: the metrics of its methods and budgets, an event on every node it left
// alone (on the Node and its NodeClaim), and DisruptionBlocked on NodePools whose budget is 0.
func (c *Controller) observe(snapshot *state.ClusterState, plan *planner.Plan) {
	for method, d := range plan.Durations {
		c.metrics.EvaluationDuration.WithLabelValues(methodReason(method), consolidationType(method)).Observe(d.Seconds())
	}
	c.metrics.EligibleNodes.WithLabelValues(lowerReason(karpv1.DisruptionReasonEmpty)).Set(float64(plan.Eligible[planner.TypeEmpty]))
	c.metrics.EligibleNodes.WithLabelValues(lowerReason(karpv1.DisruptionReasonUnderutilized)).Set(float64(max(plan.Eligible[planner.TypeMulti], plan.Eligible[planner.TypeSingle])))
	c.metrics.EligibleNodes.WithLabelValues(lowerReason(karpv1.DisruptionReasonDrifted)).Set(float64(plan.Eligible[planner.TypeDrift]))
	c.metrics.EligibleNodes.WithLabelValues(lowerReason(planner.DisruptionReasonExpired)).Set(float64(plan.Eligible[planner.TypeExpired]))
	for _, t := range plan.TimedOut {
		c.metrics.Timeouts.WithLabelValues(t).Inc()
	}
	nodes := map[string]*corev1.Node{}
	for i := range snapshot.Nodes {
		nodes[snapshot.Nodes[i].Name] = &snapshot.Nodes[i]
	}
	claims := map[string]*karpv1.NodeClaim{}
	poolNodes := map[string]int{}
	for i := range snapshot.NodeClaims {
		claims[snapshot.NodeClaims[i].Name] = &snapshot.NodeClaims[i]
		poolNodes[snapshot.NodeClaims[i].Labels[karpv1.NodePoolLabelKey]]++
	}
	for _, v := range plan.Verdicts {
		ttl := blockedTTL
		if v.Reason == planner.ReasonUnconsolidatable {
			ttl = unconsolidatedTTL
		}
		if n := nodes[v.Node]; n != nil {
			c.event(n, corev1.EventTypeNormal, v.Reason, ttl, "%s", v.Message)
		}
		if nc := claims[v.NodeClaim]; nc != nil {
			c.event(nc, corev1.EventTypeNormal, v.Reason, ttl, "%s", v.Message)
		}
	}
	for i := range snapshot.NodePools {
		np := &snapshot.NodePools[i]
		for _, reason := range budget.Reasons() {
			value := plan.BudgetValue[np.Name][reason]
			c.metrics.AllowedDisruptions.WithLabelValues(np.Name, string(reason)).Set(float64(value))
			c.metrics.NodesConsumingBudgets.WithLabelValues(np.Name, string(reason)).Set(float64(plan.Disrupting[np.Name]))
			if value == 0 && poolNodes[np.Name] > 0 {
				c.event(np, corev1.EventTypeNormal, planner.ReasonDisruptionBlocked, budgetBlockedTTL,
					"No allowed disruptions for disruption reason %s due to blocking budget", reason)
			}
		}
	}
}

// methodReason is the reason label of a method's metrics.
func methodReason(method string) string {
	switch method {
	case planner.TypeEmpty:
		return lowerReason(karpv1.DisruptionReasonEmpty)
	case planner.TypeDrift:
		return lowerReason(karpv1.DisruptionReasonDrifted)
	case planner.TypeExpired:
		return lowerReason(planner.DisruptionReasonExpired)
	}
	return lowerReason(karpv1.DisruptionReasonUnderutilized)
}
