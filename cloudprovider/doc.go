// Package cloudprovider is the seam between Joiner's provider-independent controllers and a cloud:
// the CloudProvider interface that launches, finds, lists and deletes the machines behind
// NodeClaims, the typed errors it returns, and the instance-type model (capacity, overhead,
// requirements, priced offerings) the scheduler packs pods onto.
//
// It holds no provider-specific code and no scheduling policy; a provider lives in its own package
// and implements CloudProvider.
package cloudprovider
