package aws

import (
	"sync"
	"time"

	"github.com/joiner-dev/joiner/controllers/defaults"

	"k8s.io/utils/clock"
)

// DefaultUnavailableTTL is how long an offering that ran out of capacity stays unavailable, as in
// Karpenter.
const DefaultUnavailableTTL = 3 * time.Minute

// UnavailableOfferings remembers, for a while, the offerings (instance type, zone, capacity type),
// whole capacity types and subnets that EC2 refused for lack of capacity, so that the next
// scheduling simulation and launch route around them. Its methods are safe for concurrent use.
type UnavailableOfferings struct {
	clock clock.PassiveClock
	ttl   time.Duration

	mu      sync.Mutex
	entries map[string]time.Time // key -> expiry
	seq     uint64               // bumped whenever an entry is added or expires
}

// NewUnavailableOfferings returns an empty cache whose entries live ttl (DefaultUnavailableTTL
// when ttl <= 0), timed by clk (the real clock when nil).
func NewUnavailableOfferings(clk clock.PassiveClock, ttl time.Duration) *UnavailableOfferings {
	clk = defaults.Clock(clk)
	if ttl <= 0 {
		ttl = DefaultUnavailableTTL
	}
	return &UnavailableOfferings{clock: clk, ttl: ttl, entries: map[string]time.Time{}}
}

func offeringKey(instanceType, zone, capacityType string) string {
	return "offering/" + capacityType + "/" + instanceType + "/" + zone
}

func capacityTypeKey(capacityType string) string { return "capacity-type/" + capacityType }

func subnetKey(subnetID string) string { return "subnet/" + subnetID }

// MarkUnavailable makes the offering unavailable for the TTL (extended when already marked).
func (u *UnavailableOfferings) MarkUnavailable(instanceType, zone, capacityType string) {
	u.mark(offeringKey(instanceType, zone, capacityType))
}

// MarkCapacityTypeUnavailable makes every offering of the capacity type unavailable for the TTL,
// as after an account-wide spot limit.
func (u *UnavailableOfferings) MarkCapacityTypeUnavailable(capacityType string) {
	u.mark(capacityTypeKey(capacityType))
}

// MarkSubnetUnavailable keeps launches out of the subnet for the TTL (it ran out of addresses).
// A zone whose subnets are all unavailable has no available offerings.
func (u *UnavailableOfferings) MarkSubnetUnavailable(subnetID string) {
	u.mark(subnetKey(subnetID))
}

func (u *UnavailableOfferings) mark(key string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	u.entries[key] = u.clock.Now().Add(u.ttl)
	u.seq++
}

// IsUnavailable reports whether the offering, or its whole capacity type, is marked.
func (u *UnavailableOfferings) IsUnavailable(instanceType, zone, capacityType string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.liveLocked(capacityTypeKey(capacityType)) || u.liveLocked(offeringKey(instanceType, zone, capacityType))
}

// IsSubnetUnavailable reports whether the subnet is marked.
func (u *UnavailableOfferings) IsSubnetUnavailable(subnetID string) bool {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.liveLocked(subnetKey(subnetID))
}

func (u *UnavailableOfferings) liveLocked(key string) bool {
	exp, ok := u.entries[key]
	return ok && u.clock.Now().Before(exp)
}

// SeqNum returns a number that changes whenever an entry is added or has expired, so that
// instance types built under an older number can be rebuilt.
func (u *UnavailableOfferings) SeqNum() uint64 {
	u.mu.Lock()
	defer u.mu.Unlock()
	now := u.clock.Now()
	for k, exp := range u.entries {
		if !now.Before(exp) {
			delete(u.entries, k)
			u.seq++
		}
	}
	return u.seq
}

// Flush forgets every entry.
func (u *UnavailableOfferings) Flush() {
	u.mu.Lock()
	defer u.mu.Unlock()
	clear(u.entries)
	u.seq++
}
