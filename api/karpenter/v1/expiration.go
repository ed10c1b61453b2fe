package v1

import "time"

// Joiner's NodePool annotations that choose how the NodePool's NodeClaims expire. Karpenter
// deletes a NodeClaim forcefully at creation + expireAfter, ignoring disruption budgets; these
// annotations opt a NodePool into graceful expiration instead. They are annotations, not fields,
// so that the NodePool schema stays Karpenter's.
const (
	// ExpirationAnnotationKey on a NodePool chooses how its NodeClaims expire: ExpirationForceful
	// (the default, as in Karpenter) or ExpirationGraceful.
	ExpirationAnnotationKey = "joiner.dev/expiration"
	// ExpirationGraceAnnotationKey on a NodePool with graceful expiration is how long (a Go
	// duration such as "24h" or "90m") an expired NodeClaim may wait for a replacement within the
	// disruption budgets before it is deleted forcefully. Default DefaultExpirationGrace.
	ExpirationGraceAnnotationKey = "joiner.dev/expiration-grace"
)

// Values of ExpirationAnnotationKey.
const (
	// ExpirationForceful deletes a NodeClaim at its expireAfter deadline, whatever the budgets say
	// (Karpenter's behaviour, and the default).
	ExpirationForceful = "Forceful"
	// ExpirationGraceful marks a NodeClaim Expired at its expireAfter deadline (spread by a jitter)
	// so that disruption replaces it within the budgets, and deletes it forcefully only once the
	// grace period (ExpirationGraceAnnotationKey) has passed too.
	ExpirationGraceful = "Graceful"
)

// DefaultExpirationGrace is the grace period of graceful expiration when the NodePool does not
// set ExpirationGraceAnnotationKey (or sets it to something invalid).
const DefaultExpirationGrace = 24 * time.Hour
