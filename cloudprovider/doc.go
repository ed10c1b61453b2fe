// Package cloudprovider is the seam between Joiner's provider-independent controllers and a cloud:
// the CloudProvider interface that launches, finds, lists and deletes the machines behind
// NodeClaims, the typed errors it returns, and the instance-type model (capacity, overhead,
// requirements, priced offerings) the scheduler packs pods onto.
//
// It holds no provider-specific code and no scheduling policy. The folder is the seam only: this
// package, fake/ (a provider for tests) and metrics/ (the timing decorator). Providers live above it
// in providers/ (aws, local, and the embedded catalog they share), import it and implement
// CloudProvider; nothing here imports a provider, a controller or the webhooks (hack/layers
// enforces it).
package cloudprovider
