// Package defaults holds the one rule the controllers' Options follow for numeric settings: a
// value that is not positive (the zero value of an Options struct) means the controller's default.
// It knows no setting and no default itself.
package defaults

import "time"

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
