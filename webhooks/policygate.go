package webhooks

import (
	"context"
	"fmt"

	"github.com/go-logr/logr"

	"github.com/joiner-dev/joiner/policy"
)

// DryRunHook receives the violations of DryRun policies (and the evaluation failures of DryRun policies)
// found at admission, after the request has been admitted. The audit side uses it to record them, for
// example as Events or in a ProvisioningPolicy's status. It runs on the admission path: keep it fast and
// never block on the API server.
type DryRunHook func(ctx context.Context, review policy.Review, violations []policy.Violation)

// policyGate runs the policy engine for a review and sorts its violations by enforcement action.
type policyGate struct {
	engine   *policy.Engine
	metrics  *metrics
	onDryRun DryRunHook
	log      logr.Logger
}

// evaluate returns what the matching policies say about a review:
//   - Deny violations deny, one line each formatted "[policy] message (field: path)";
//   - Warn violations become warnings in the same format;
//   - DryRun violations are only logged, counted and passed to the DryRunHook.
//
// A policy that fails to evaluate is treated according to its own action: a Deny policy denies (fail
// closed), a Warn policy warns, a DryRun policy is only recorded. An engine error about the review itself
// denies, since no policy could be checked.
func (g *policyGate) evaluate(ctx context.Context, r policy.Review) findings {
	var f findings
	if g.engine == nil {
		return f
	}
	vs, err := g.engine.Evaluate(ctx, r)
	if err != nil {
		g.log.Error(err, "policy evaluation failed", "kind", r.Kind.Kind, "name", r.Name, "namespace", r.Namespace)
		g.metrics.evaluationFailed(r.Kind.Kind)
		f.deny(fmt.Sprintf("ProvisioningPolicies could not be evaluated for %s %q: %v; the request is denied because policies fail closed, retry and check the joiner webhook logs if it persists", r.Kind.Kind, r.Name, err))
		return f
	}
	var dryRun []policy.Violation
	for _, v := range vs {
		g.metrics.record(r.Kind.Kind, v)
		switch v.Action {
		case policy.ActionWarn:
			f.warn(v.String())
		case policy.ActionDryRun:
			dryRun = append(dryRun, v)
			g.log.Info("dry-run policy violation", "policy", v.Policy, "message", v.Message, "field", v.Field,
				"error", v.IsError(), "kind", r.Kind.Kind, "name", r.Name, "namespace", r.Namespace, "operation", r.Operation)
		default: // Deny, and anything unknown fails closed.
			f.deny(v.String())
		}
	}
	if len(dryRun) > 0 && g.onDryRun != nil {
		g.onDryRun(ctx, r, dryRun)
	}
	return f
}
