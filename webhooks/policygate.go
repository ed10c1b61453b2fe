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

// evaluate returns what the matching policies say about a review, as policy.Engine.Decide sorts it:
//   - the Verdict's Denials deny, one line each formatted "[policy] message (field: path)": Deny
//     violations and the failures of Deny policies (fail closed);
//   - its Warnings become warnings in the same format;
//   - what it Records (DryRun violations and failures) is only logged, counted and passed to the
//     DryRunHook.
//
// An engine error about the review itself denies, since no policy could be checked.
func (g *policyGate) evaluate(ctx context.Context, r policy.Review) findings {
	var f findings
	if g.engine == nil {
		return f
	}
	verdict, err := g.engine.Decide(ctx, r)
	if err != nil {
		g.log.Error(err, "policy evaluation failed", "kind", r.Kind.Kind, "name", r.Name, "namespace", r.Namespace)
		g.metrics.evaluationFailed(r.Kind.Kind)
		f.deny(fmt.Sprintf("ProvisioningPolicies could not be evaluated for %s %q: %v; the request is denied because policies fail closed, retry and check the joiner webhook logs if it persists", r.Kind.Kind, r.Name, err))
		return f
	}
	for _, v := range verdict.All() {
		g.metrics.record(r.Kind.Kind, v)
	}
	for _, v := range verdict.Denials() {
		f.deny(v.String())
	}
	for _, v := range verdict.Warnings() {
		f.warn(v.String())
	}
	dryRun := verdict.Recorded()
	for _, v := range dryRun {
		g.log.Info("dry-run policy violation", "policy", v.Policy, "message", v.Message, "field", v.Field,
			"error", v.IsError(), "kind", r.Kind.Kind, "name", r.Name, "namespace", r.Namespace, "operation", r.Operation)
	}
	if len(dryRun) > 0 && g.onDryRun != nil {
		g.onDryRun(ctx, r, dryRun)
	}
	return f
}
