package provisioning

import (
	"context"
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/nodeclaimgate"
	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling"
)

// DefaultLaunchWorkers is how many NodeClaims of one round are created at once by default.
const DefaultLaunchWorkers = 10

// launchWorkers returns Options.LaunchWorkers with its default, or an error naming the field when
// it is negative.
func launchWorkers(n int) (int, error) {
	switch {
	case n < 0:
		return 0, fmt.Errorf("provisioning option LaunchWorkers is %d: want 0 (the default, %d) or more", n, DefaultLaunchWorkers)
	case n == 0:
		return DefaultLaunchWorkers, nil
	default:
		return n, nil
	}
}

// launch creates the NodeClaims of a round's plans, at most p.launchWorkers at once, each through
// the tenancy gate, and reports each one as it is stored: the metric, the log entry, the
// nominations and the Nominated Events of its pods. A create that fails does not stop the others:
// its pods get a FailedProvisioning Event and its error, naming the NodePool, is returned with the
// other failures in plan order. A NodeClaim the gate refused is neither created nor an error (the
// gate told its pods why). It returns how many NodeClaims were created.
//
// The plans were computed within the NodePools' limits before the round creates anything, and
// creating a NodeClaim counts nothing against them here, so the order of the creates changes no
// accounting. A crash between creates leaves the NodeClaims stored so far; the next round counts
// them as in-flight capacity, whichever subset of the plans they are.
func (p *Provisioner) launch(ctx context.Context, plans []*scheduling.NodeClaimPlan, dra draRound) (int, []error) {
	claims := make([]*karpv1.NodeClaim, len(plans))
	for i, plan := range plans {
		claims[i] = plan.NodeClaim()
		dra.strip(claims[i], plan.Pods)
	}
	errs := make([]error, len(plans))
	stored := make([]bool, len(plans))
	sem := make(chan struct{}, p.launchWorkers)
	var wg sync.WaitGroup
	for i, plan := range plans {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			errs[i] = fmt.Errorf("nodepool %s: %w", plan.NodePool.Name, ctx.Err())
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			stored[i], errs[i] = p.createOne(ctx, plan, claims[i])
		}()
	}
	wg.Wait()
	created := 0
	var failed []error
	for i := range plans {
		if stored[i] {
			created++
		}
		if errs[i] != nil {
			failed = append(failed, errs[i])
		}
	}
	return created, failed
}

// createOne creates nc, planned by plan, through the gate and reports the outcome (see launch).
// It reports whether nc was stored; the error is that of a create that failed, not a refusal.
func (p *Provisioner) createOne(ctx context.Context, plan *scheduling.NodeClaimPlan, nc *karpv1.NodeClaim) (bool, error) {
	if err := p.gate.Create(ctx, nc, plan.Pods); err != nil {
		if errors.Is(err, nodeclaimgate.ErrRefused) {
			return false, nil // the gate told the pods why; planning them again would be refused again
		}
		p.Log.Error(err, "create NodeClaim", "nodepool", plan.NodePool.Name)
		for _, pod := range plan.Pods {
			p.event(pod, corev1.EventTypeWarning, ReasonFailedProvisioning, "could not create a NodeClaim from NodePool %q: %v", plan.NodePool.Name, err)
		}
		return false, fmt.Errorf("nodepool %s: %w", plan.NodePool.Name, err)
	}
	p.Metrics.created(plan)
	p.Log.Info("created NodeClaim", "nodeclaim", nc.Name, "nodepool", plan.NodePool.Name, "pods", len(plan.Pods),
		"instanceTypes", summarize(plan.InstanceTypeNames(), 5), "price", plan.Price)
	p.nominate(plan.Pods, nc.Name)
	for _, pod := range plan.Pods {
		p.event(pod, corev1.EventTypeNormal, ReasonNominated, "pod should schedule on NodeClaim %s (NodePool %s)", nc.Name, plan.NodePool.Name)
	}
	return true, nil
}
