package provisioning

import (
	"context"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

func TestBatcher(t *testing.T) {
	tests := []struct {
		name string
		// triggers are the fake-clock offsets at which Trigger is called after the first.
		triggers []time.Duration
		// want is how long after opening the batch closes.
		want time.Duration
	}{
		{name: "closes after the idle time", want: time.Second},
		{name: "a trigger extends the idle window", triggers: []time.Duration{750 * time.Millisecond}, want: 1750 * time.Millisecond},
		{name: "closes at the maximum however busy", triggers: []time.Duration{
			750 * time.Millisecond, 1500 * time.Millisecond, 2250 * time.Millisecond, 3000 * time.Millisecond, 3750 * time.Millisecond,
		}, want: 4 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			start := time.Unix(1_000_000, 0)
			clk := clocktesting.NewFakeClock(start)
			b := &Batcher{Idle: time.Second, MaxDuration: 4 * time.Second, Clock: clk}
			done := make(chan time.Time, 1)
			b.Trigger()
			go func() {
				if b.Wait(context.Background()) {
					done <- clk.Now()
				}
			}()
			// Step the fake clock in 250ms ticks, triggering where the case says. After each step
			// the Wait goroutine gets time to return before the clock moves on.
			next := 0
			for elapsed := time.Duration(0); elapsed <= 6*time.Second; elapsed += 250 * time.Millisecond {
				waitForTimers(t, clk)
				select {
				case at := <-done:
					if got := at.Sub(start); got != tt.want {
						t.Fatalf("batch closed after %v, want %v", got, tt.want)
					}
					return
				case <-time.After(250 * time.Millisecond):
				}
				if next < len(tt.triggers) && elapsed == tt.triggers[next] {
					b.Trigger()
					next++
					time.Sleep(100 * time.Millisecond) // let Wait reset its idle timer
				}
				clk.Step(250 * time.Millisecond)
			}
			select {
			case at := <-done:
				if got := at.Sub(start); got != tt.want {
					t.Fatalf("batch closed after %v, want %v", got, tt.want)
				}
			case <-time.After(5 * time.Second):
				t.Fatal("batch never closed")
			}
		})
	}
}

// waitForTimers gives the Wait goroutine a moment to react to the last step or trigger.
func waitForTimers(t *testing.T, clk *clocktesting.FakeClock) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Second)
	for !clk.HasWaiters() && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
}

func TestBatcherStopsWithContext(t *testing.T) {
	b := &Batcher{Idle: time.Hour, MaxDuration: time.Hour}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if b.Wait(ctx) {
		t.Fatal("Wait reported a batch after the context ended")
	}
}
