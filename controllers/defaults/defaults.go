// Package defaults holds the one rule the controllers' Options follow for numeric settings: a
// value that is not positive (the zero value of an Options struct) means the controller's default.
// It knows no setting and no default itself.
package defaults

import (
	"time"

	"k8s.io/utils/clock"
)

// Positive returns v when it is positive, else def.
func Positive[T int | int32 | int64 | float64 | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// MaxConcurrentReconciles is how many objects a controller reconciles in parallel unless its
// options say otherwise (the termination controller, whose work is mostly waiting, allows more).
const MaxConcurrentReconciles = 10

// Clock returns c, or the real clock when c is nil: the rule for every injected clock. C is the
// clock interface the caller needs (clock.Clock, clock.PassiveClock, clock.WithTicker, ...), all of
// which the real clock implements.
func Clock[C clock.PassiveClock](c C) C {
	if any(c) == nil {
		real, _ := any(clock.RealClock{}).(C)
		return real
	}
	return c
}
