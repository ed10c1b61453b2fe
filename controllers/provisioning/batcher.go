package provisioning

import (
	"context"
	"sync"
	"time"

	"k8s.io/utils/clock"
)

// Batcher collects triggers into batches: a batch closes once no trigger has come for Idle, or
// MaxDuration after it opened, whichever is first.
type Batcher struct {
	Idle        time.Duration
	MaxDuration time.Duration
	Clock       clock.Clock

	once    sync.Once
	trigger chan struct{}
}

func (b *Batcher) init() {
	b.once.Do(func() {
		b.trigger = make(chan struct{}, 1)
		if b.Clock == nil {
			b.Clock = clock.RealClock{}
		}
	})
}

// Trigger records that something needs provisioning; it never blocks.
func (b *Batcher) Trigger() {
	b.init()
	select {
	case b.trigger <- struct{}{}:
	default:
	}
}

// Wait blocks until a batch opens and closes, and reports false when ctx ended first.
func (b *Batcher) Wait(ctx context.Context) bool {
	b.init()
	select {
	case <-b.trigger:
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
			return true
		case <-maxTimer.C():
			return true
		case <-ctx.Done():
			return false
		}
	}
}
