package provisioning

import (
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/joiner-dev/joiner/controllers/state"
	"github.com/joiner-dev/joiner/tenancy"
)

// reportTenancy tells every pending pod whose own spec selects or tolerates a NodePool its
// namespace is not bound to (package tenancy, the rule the Pod webhooks enforce at admission, failing
// open) why no capacity is launched for it there: a log line and an Event (reason
// tenancy.ReasonViolation). The simulation keeps such pods off those NodePools whatever is
// reported: state.BuildInput restricts every pending pod to its namespace's NodePools.
func (p *Provisioner) reportTenancy(pods []*corev1.Pod, s *state.ClusterState) {
	tenants := s.Tenancy()
	for _, pod := range pods {
		violations := tenants.Violations(pod, s.NodePools)
		if len(violations) == 0 {
			continue
		}
		bound := tenants.Bound(pod.Namespace)
		var reached, messages []string
		for _, v := range violations {
			messages = append(messages, v.Message)
			for _, name := range v.NodePools {
				if !slices.Contains(reached, name) {
					reached = append(reached, name)
				}
			}
		}
		p.Log.Info("pending pod breaks NodePool tenancy; no capacity is launched for it outside its namespace's NodePools",
			"pod", client.ObjectKeyFromObject(pod).String(), "bound", bound, "nodePools", reached)
		p.event(pod, corev1.EventTypeWarning, tenancy.ReasonViolation,
			"no capacity is launched for this pod in NodePool %s: namespace %q is bound to %s only: %s",
			strings.Join(reached, ", "), pod.Namespace, strings.Join(bound, ", "), strings.Join(messages, "; "))
	}
}
