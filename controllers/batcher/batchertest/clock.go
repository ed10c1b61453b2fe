// Package batchertest helps the tests of code timed by a batcher.Batcher (or any code that sets
// timers on an injected clock): its fake clock tells the test whenever the code under test has
// set a timer, so that the test steps the clock only then and never sleeps. It is for tests only;
// production code must not import it.
package batchertest

import (
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

// armedBuffer is how many timer reports Clock holds for the test before a timer blocks.
const armedBuffer = 100

// Clock is a fake clock that reports on Armed every timer it starts or resets, as the fake time
// at which the timer fires. Read Armed: once armedBuffer reports are pending, setting a timer
// blocks until the test reads one.
type Clock struct {
	*clocktesting.FakeClock
	// Armed receives the firing time of every timer set on the clock.
	Armed chan time.Time
}

// NewClock returns a Clock whose fake time starts at now.
func NewClock(now time.Time) *Clock {
	return &Clock{FakeClock: clocktesting.NewFakeClock(now), Armed: make(chan time.Time, armedBuffer)}
}

// NewTimer starts a fake timer and reports it on Armed.
func (c *Clock) NewTimer(d time.Duration) clock.Timer {
	t := c.FakeClock.NewTimer(d)
	c.Armed <- c.Now().Add(d)
	return &armedTimer{Timer: t, clock: c}
}

// armedTimer reports its resets on its Clock's Armed.
type armedTimer struct {
	clock.Timer
	clock *Clock
}

// Reset restarts the timer and reports it on Armed.
func (t *armedTimer) Reset(d time.Duration) bool {
	active := t.Timer.Reset(d)
	t.clock.Armed <- t.clock.Now().Add(d)
	return active
}
