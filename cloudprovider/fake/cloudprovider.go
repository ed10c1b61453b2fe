// Package fake is an in-memory CloudProvider for tests: it records every call, serves
// configurable instance types, injects errors and insufficient capacity, and "launches" a
// NodeClaim by picking the cheapest compatible instance type and offering. It also builds the
// synthetic instance types of the scheduling benchmark.
//
// It must never be wired into a production binary and never talks to a cloud.
package fake

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/requirements"
)

// CapacityPool names offerings that have run out; an empty field matches any value.
type CapacityPool struct {
	// InstanceType, Zone and CapacityType name the exhausted offerings; "" matches any.
	InstanceType, Zone, CapacityType string
}

func (p CapacityPool) matches(it string, o *cloudprovider.Offering) bool {
	return (p.InstanceType == "" || p.InstanceType == it) &&
		(p.Zone == "" || p.Zone == o.Zone()) &&
		(p.CapacityType == "" || p.CapacityType == o.CapacityType())
}

// CloudProvider is the fake provider. Set its exported fields before handing it to the code under
// test; the methods are safe for concurrent use.
type CloudProvider struct {
	// InstanceTypes are served for every NodePool not in InstanceTypesForNodePool; nil serves
	// InstanceTypes(8).
	InstanceTypes []*cloudprovider.InstanceType
	// InstanceTypesForNodePool overrides InstanceTypes per NodePool name.
	InstanceTypesForNodePool map[string][]*cloudprovider.InstanceType
	// ErrorsForNodePool makes GetInstanceTypes fail for a NodePool name.
	ErrorsForNodePool map[string]error
	// InsufficientCapacity lists the offerings Create treats as out of capacity.
	InsufficientCapacity []CapacityPool
	// Drifted is what IsDrifted returns.
	Drifted cloudprovider.DriftReason
	// Repair is what RepairPolicies returns; nil returns cloudprovider.ReadyRepairPolicies().
	Repair []cloudprovider.RepairPolicy

	mu            sync.Mutex
	nextCreateErr error
	nextDeleteErr error
	nextGetErr    error
	createCalls   []*karpv1.NodeClaim
	deleteCalls   []*karpv1.NodeClaim
	getCalls      []string
	created       map[string]*karpv1.NodeClaim
	launched      int
}

var _ cloudprovider.CloudProvider = (*CloudProvider)(nil)

// New returns a fake provider serving the given instance types (InstanceTypes(8) when none).
func New(instanceTypes ...*cloudprovider.InstanceType) *CloudProvider {
	return &CloudProvider{InstanceTypes: instanceTypes}
}

// FailNextCreate makes the next Create return err (once).
func (c *CloudProvider) FailNextCreate(err error) { c.mu.Lock(); c.nextCreateErr = err; c.mu.Unlock() }

// FailNextDelete makes the next Delete return err (once).
func (c *CloudProvider) FailNextDelete(err error) { c.mu.Lock(); c.nextDeleteErr = err; c.mu.Unlock() }

// FailNextGet makes the next Get return err (once).
func (c *CloudProvider) FailNextGet(err error) { c.mu.Lock(); c.nextGetErr = err; c.mu.Unlock() }

// CreateCalls returns copies of the NodeClaims passed to Create, in call order.
func (c *CloudProvider) CreateCalls() []*karpv1.NodeClaim {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.createCalls)
}

// DeleteCalls returns copies of the NodeClaims passed to Delete, in call order.
func (c *CloudProvider) DeleteCalls() []*karpv1.NodeClaim {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.deleteCalls)
}

// GetCalls returns the provider IDs passed to Get, in call order.
func (c *CloudProvider) GetCalls() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.getCalls)
}

// Reset forgets calls, launched machines and pending injected errors; configuration fields stay.
func (c *CloudProvider) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.nextCreateErr, c.nextDeleteErr, c.nextGetErr = nil, nil, nil
	c.createCalls, c.deleteCalls, c.getCalls = nil, nil, nil
	c.created = nil
	c.launched = 0
}

func (c *CloudProvider) instanceTypesFor(nodePool string) []*cloudprovider.InstanceType {
	if its, ok := c.InstanceTypesForNodePool[nodePool]; ok {
		return its
	}
	if c.InstanceTypes == nil {
		c.InstanceTypes = InstanceTypes(8)
	}
	return c.InstanceTypes
}

// Create launches the NodeClaim in memory on the cheapest available offering of the cheapest
// instance type that is compatible with its requirements and fits its resource requests, skipping
// offerings listed in InsufficientCapacity. When only such offerings remain it returns an
// *InsufficientCapacityError naming the cheapest of them.
func (c *CloudProvider) Create(_ context.Context, nodeClaim *karpv1.NodeClaim) (*karpv1.NodeClaim, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.createCalls = append(c.createCalls, nodeClaim.DeepCopy())
	if err := c.nextCreateErr; err != nil {
		c.nextCreateErr = nil
		return nil, err
	}
	reqs, err := requirements.FromNodeSelectorRequirementsWithMinValues(nodeClaim.Spec.Requirements...)
	if err != nil {
		return nil, fmt.Errorf("create nodeclaim %s: %w", nodeClaim.Name, err)
	}
	type choice struct {
		it *cloudprovider.InstanceType
		o  *cloudprovider.Offering
	}
	var best, bestExhausted *choice
	better := func(a *choice, it *cloudprovider.InstanceType, o *cloudprovider.Offering) bool {
		return a == nil || o.Price < a.o.Price || (o.Price == a.o.Price && it.Name < a.it.Name)
	}
	for _, it := range c.instanceTypesFor(nodeClaim.Labels[karpv1.NodePoolLabelKey]) {
		if _, conflict := reqs.FirstConflict(it.Requirements); conflict || !it.Fits(nodeClaim.Spec.Resources.Requests) {
			continue
		}
		for _, o := range it.Offerings {
			if !o.Available || !o.CompatibleWith(reqs) {
				continue
			}
			exhausted := slices.ContainsFunc(c.InsufficientCapacity, func(p CapacityPool) bool { return p.matches(it.Name, o) })
			switch {
			case exhausted && better(bestExhausted, it, o):
				bestExhausted = &choice{it, o}
			case !exhausted && better(best, it, o):
				best = &choice{it, o}
			}
		}
	}
	if best == nil {
		if bestExhausted != nil {
			return nil, cloudprovider.NewInsufficientCapacityError(bestExhausted.it.Name, bestExhausted.o.Zone(), bestExhausted.o.CapacityType(),
				errors.New("injected by the fake provider"))
		}
		return nil, fmt.Errorf("create nodeclaim %s: no instance type satisfies requirements %s and requests %v", nodeClaim.Name, reqs, nodeClaim.Spec.Resources.Requests)
	}
	out := nodeClaim.DeepCopy()
	labels := map[string]string{}
	maps.Copy(labels, reqs.Labels())
	maps.Copy(labels, best.it.Requirements.Labels())
	maps.Copy(labels, best.o.Requirements.Labels())
	maps.Copy(labels, out.Labels)
	labels[karpv1.LabelInstanceType] = best.it.Name
	out.Labels = labels
	c.launched++
	out.Status.ProviderID = fmt.Sprintf("fake:///%s/%d", best.o.Zone(), c.launched)
	out.Status.Capacity = best.it.Capacity.DeepCopy()
	out.Status.Allocatable = best.it.Allocatable().DeepCopy()
	if c.created == nil {
		c.created = map[string]*karpv1.NodeClaim{}
	}
	c.created[out.Status.ProviderID] = out.DeepCopy()
	return out, nil
}

// Delete forgets the NodeClaim's machine, or returns a *NodeClaimNotFoundError when there is none.
func (c *CloudProvider) Delete(_ context.Context, nodeClaim *karpv1.NodeClaim) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.deleteCalls = append(c.deleteCalls, nodeClaim.DeepCopy())
	if err := c.nextDeleteErr; err != nil {
		c.nextDeleteErr = nil
		return err
	}
	id := nodeClaim.Status.ProviderID
	if _, ok := c.created[id]; !ok {
		return cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("no machine with provider id %q", id))
	}
	delete(c.created, id)
	return nil
}

// Get returns a copy of the launched NodeClaim with the provider ID.
func (c *CloudProvider) Get(_ context.Context, providerID string) (*karpv1.NodeClaim, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.getCalls = append(c.getCalls, providerID)
	if err := c.nextGetErr; err != nil {
		c.nextGetErr = nil
		return nil, err
	}
	nc, ok := c.created[providerID]
	if !ok {
		return nil, cloudprovider.NewNodeClaimNotFoundError(fmt.Errorf("no machine with provider id %q", providerID))
	}
	return nc.DeepCopy(), nil
}

// List returns copies of the launched NodeClaims, ordered by provider ID.
func (c *CloudProvider) List(context.Context) ([]*karpv1.NodeClaim, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]*karpv1.NodeClaim, 0, len(c.created))
	for _, nc := range c.created {
		out = append(out, nc.DeepCopy())
	}
	slices.SortFunc(out, func(a, b *karpv1.NodeClaim) int { return cmp.Compare(a.Status.ProviderID, b.Status.ProviderID) })
	return out, nil
}

// GetInstanceTypes returns the NodePool's instance types, or its configured error.
func (c *CloudProvider) GetInstanceTypes(_ context.Context, nodePool *karpv1.NodePool) ([]*cloudprovider.InstanceType, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.ErrorsForNodePool[nodePool.Name]; err != nil {
		return nil, fmt.Errorf("get instance types for nodepool %s: %w", nodePool.Name, err)
	}
	return c.instanceTypesFor(nodePool.Name), nil
}

// IsDrifted returns the configured Drifted reason.
func (c *CloudProvider) IsDrifted(context.Context, *karpv1.NodeClaim) (cloudprovider.DriftReason, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.Drifted, nil
}

// RepairPolicies returns Repair, or the Ready policies when Repair is nil.
func (c *CloudProvider) RepairPolicies() []cloudprovider.RepairPolicy {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.Repair == nil {
		return cloudprovider.ReadyRepairPolicies()
	}
	return c.Repair
}

// Name returns "fake".
func (c *CloudProvider) Name() string { return "fake" }
