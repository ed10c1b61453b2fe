// Package batcher decides when a controller that works in rounds (the provisioner, the policy
// audit) should run its next round: after a burst of triggers has settled, and optionally
// periodically when nothing triggers it. It only times: it never runs the work itself, starts no
// goroutines, and reads time only from its injected clock.
package batcher

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Batcher collects triggers into batches: a batch opens at a trigger and closes once no trigger
// has come for Idle, or MaxDuration after it opened, whichever is first. With a Period, it also
// closes a (triggerless) batch every Period.
//
// Trigger may be called from any goroutine; Wait from one goroutine at a time.
type Batcher struct {
	// Idle closes a batch once no trigger has come for this long.
	Idle time.Duration
	// MaxDuration closes a batch this long after it opened, however busy.
	MaxDuration time.Duration
	// Period, when positive, makes Wait return without any trigger at every multiple of Period
	// after Wait was first called (at once when one went by while the caller worked), so work is
	// looked at again even when nothing triggers it. A batch that closes after such a time
	// counts as that periodic round. Zero means triggers alone open batches.
	Period time.Duration
	// Clock times the batches; nil means the real clock.
	Clock clock.Clock

	once    sync.Once
	trigger chan struct{}
	// nextPeriodic is when the next periodic round is due; only Wait uses it.
	nextPeriodic time.Time
}

func (b *Batcher) init() {
	b.once.Do(func() {
		b.trigger = make(chan struct{}, 1)
		if b.Clock == nil {
			b.Clock = clock.RealClock{}
		}
	})
}

// Trigger records that there is work to do; it never blocks.
func (b *Batcher) Trigger() {
	b.init()
	select {
	case b.trigger <- struct{}{}:
	default:
	}
}

// Wait blocks until a batch opens and closes, or a periodic round is due, and reports false when
// ctx ended first.
func (b *Batcher) Wait(ctx context.Context) bool {
	b.init()
	if ctx.Err() != nil {
		return false
	}
	due, periodic, stop := b.periodic()
	defer stop()
	if due {
		// A periodic round went by while the caller worked.
		b.advancePeriodic()
		return true
	}
	select {
	case <-b.trigger:
		stop() // a periodic round due by the time the batch closes is covered by it
	case <-periodic:
		b.advancePeriodic()
		return true
	case <-ctx.Done():
		return false
	}
	maxTimer := b.Clock.NewTimer(b.MaxDuration)
	defer maxTimer.Stop()
	idle := b.Clock.NewTimer(b.Idle)
	defer idle.Stop()
	for {
		select {
		case <-b.trigger:
			if !idle.Stop() {
				select {
				case <-idle.C():
				default:
				}
			}
			idle.Reset(b.Idle)
		case <-idle.C():
			b.advancePeriodic()
			return true
		case <-maxTimer.C():
			b.advancePeriodic()
			return true
		case <-ctx.Done():
			return false
		}
	}
}

// periodic reports whether a periodic round is due already; if not, it returns the channel that
// fires when the next one is (nil without a Period) and a function that releases its timer.
func (b *Batcher) periodic() (due bool, fire <-chan time.Time, stop func()) {
	if b.Period <= 0 {
		return false, nil, func() {}
	}
	now := b.Clock.Now()
	if b.nextPeriodic.IsZero() {
		b.nextPeriodic = now.Add(b.Period)
	}
	if !now.Before(b.nextPeriodic) {
		return true, nil, func() {}
	}
	t := b.Clock.NewTimer(b.nextPeriodic.Sub(now))
	return false, t.C(), func() { t.Stop() }
}

// advancePeriodic moves the next periodic round past now: the round that is closing covers any
// periodic round due by now.
func (b *Batcher) advancePeriodic() {
	if b.Period <= 0 {
		return
	}
	now := b.Clock.Now()
	if now.Before(b.nextPeriodic) {
		return
	}
	missed := now.Sub(b.nextPeriodic) / b.Period
	b.nextPeriodic = b.nextPeriodic.Add((missed + 1) * b.Period)
}
