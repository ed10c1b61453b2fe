package local

import (
	"errors"
	"slices"
	"sync"
)

// Shortage names offerings that have run out of capacity. An empty field matches any value, so
// Shortage{Zone: "us-east-1a"} is a whole zone running dry.
type Shortage struct {
	// InstanceType is the instance type, such as "m5.large".
	InstanceType string
	// Zone is the zone, such as "us-east-1a".
	Zone string
	// CapacityType is "spot" or "on-demand".
	CapacityType string
	// Unannounced keeps the offerings available in GetInstanceTypes, so that only Create runs
	// into the shortage (and returns an *InsufficientCapacityError when nothing else is allowed),
	// as a real cloud reveals a shortage only at launch. Otherwise GetInstanceTypes marks the
	// offerings unavailable.
	Unannounced bool
}

func (s Shortage) matches(instanceType, zone, capacityType string) bool {
	return (s.InstanceType == "" || s.InstanceType == instanceType) &&
		(s.Zone == "" || s.Zone == zone) &&
		(s.CapacityType == "" || s.CapacityType == capacityType)
}

// Failures are the failures the local provider injects. The zero value injects none. Its methods
// are safe for concurrent use, and changes apply to the next call of the provider.
type Failures struct {
	mu             sync.Mutex
	shortages      []Shortage
	version        uint64 // bumped whenever shortages change
	launchFailures int
	launchErr      error
	neverRegister  map[string]struct{}
}

// AddInsufficientCapacity makes the offerings of each shortage run out, until removed.
func (f *Failures) AddInsufficientCapacity(shortages ...Shortage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range shortages {
		if !slices.Contains(f.shortages, s) {
			f.shortages = append(f.shortages, s)
		}
	}
	f.version++
}

// RemoveInsufficientCapacity ends the given shortages (each matched exactly as it was added).
func (f *Failures) RemoveInsufficientCapacity(shortages ...Shortage) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shortages = slices.DeleteFunc(f.shortages, func(s Shortage) bool { return slices.Contains(shortages, s) })
	f.version++
}

// InsufficientCapacity returns the current shortages.
func (f *Failures) InsufficientCapacity() []Shortage {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.shortages)
}

// FailLaunches makes the next n calls of Create fail with err before doing anything else. A nil
// err fails them with a *cloudprovider.CreateError of reason "LaunchFailed"; n <= 0 cancels
// pending failures.
func (f *Failures) FailLaunches(n int, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.launchFailures, f.launchErr = max(n, 0), err
}

// PendingLaunchFailures returns how many of the injected launch failures are still to come.
func (f *Failures) PendingLaunchFailures() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.launchFailures
}

// NeverRegister makes instances of the given types launch but never create their Node, as when
// a machine fails to join the cluster; the NodeClaim's liveness check must clean them up.
// Instances launched before the call are not affected.
func (f *Failures) NeverRegister(instanceTypes ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.neverRegister == nil {
		f.neverRegister = map[string]struct{}{}
	}
	for _, it := range instanceTypes {
		f.neverRegister[it] = struct{}{}
	}
}

// AllowRegister undoes NeverRegister for the given types, for instances launched afterwards.
func (f *Failures) AllowRegister(instanceTypes ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, it := range instanceTypes {
		delete(f.neverRegister, it)
	}
}

// Reset removes every injected failure.
func (f *Failures) Reset() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.shortages = nil
	f.version++
	f.launchFailures, f.launchErr = 0, nil
	f.neverRegister = nil
}

// errInjectedLaunchFailure is the cause of the injected CreateErrors.
var errInjectedLaunchFailure = errors.New("launch failure injected by the local provider's failure injection")

// takeLaunchFailure consumes one pending launch failure, reporting whether there was one and
// the error it was injected with (nil for the default CreateError).
func (f *Failures) takeLaunchFailure() (bool, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.launchFailures == 0 {
		return false, nil
	}
	f.launchFailures--
	return true, f.launchErr
}

// short reports whether the offering has run out. With announcedOnly, unannounced shortages are
// ignored (what GetInstanceTypes shows).
func (f *Failures) short(instanceType, zone, capacityType string, announcedOnly bool) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.shortLocked(instanceType, zone, capacityType, announcedOnly)
}

func (f *Failures) shortLocked(instanceType, zone, capacityType string, announcedOnly bool) bool {
	for _, s := range f.shortages {
		if (!announcedOnly || !s.Unannounced) && s.matches(instanceType, zone, capacityType) {
			return true
		}
	}
	return false
}

// shortageVersion returns a number that changes whenever the shortages change.
func (f *Failures) shortageVersion() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.version
}

// registers reports whether instances of the type create their Node.
func (f *Failures) registers(instanceType string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, never := f.neverRegister[instanceType]
	return !never
}
