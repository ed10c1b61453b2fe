package admissioncheck

import (
	"context"
	"fmt"

	"github.com/joiner-dev/joiner/policy"
)

// ByPolicy stands for the policy engine in a policy-only check (Options.PolicyOnly), where no webhook
// is called.
const ByPolicy = "policy"

// judgePolicies judges one object of a known kind by the ProvisioningPolicies alone, with the review and
// the decision the validating webhooks use: Deny violations and the failures of policies that fail closed
// refuse it, Warn violations are warnings, DryRun violations are recorded. The error is for ctx done.
func (s *session) judgePolicies(ctx context.Context, p *pass, res *Result) error {
	in := policy.ReviewInput{Operation: policy.OperationCreate, Object: p.item.Object}
	if p.item.Old != nil {
		in.Operation, in.OldObject = policy.OperationUpdate, p.item.Old
	}
	review, err := policy.BuildReview(in)
	if err == nil {
		var verdict policy.Verdict
		if verdict, err = s.c.engine.Decide(ctx, review); err == nil {
			var denials []Problem
			for _, v := range verdict.Denials() {
				denials = append(denials, policyProblem(ActionDeny, v))
			}
			for _, v := range verdict.Warnings() {
				res.Problems = append(res.Problems, policyProblem(ActionWarn, v))
			}
			for _, v := range verdict.Recorded() {
				res.Problems = append(res.Problems, policyProblem(ActionDryRun, v))
			}
			if len(denials) > 0 {
				res.reject(denials[0].Message, denials...)
			}
			return nil
		}
	}
	if ctx.Err() != nil {
		return fmt.Errorf("evaluate the policies: %w", err)
	}
	msg := "the policies could not be evaluated: " + err.Error()
	res.reject(msg, Problem{Action: ActionError, By: ByPolicy, Message: msg})
	return nil
}

// policyProblem is a policy's violation as a report line, worded as the webhook words it.
func policyProblem(action string, v policy.Violation) Problem {
	return Problem{Action: action, By: ByPolicy, Field: v.Field, Policy: v.Policy, Message: v.String()}
}
