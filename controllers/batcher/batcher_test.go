package batcher

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/joiner-dev/joiner/controllers/batcher/batchertest"
)

// harness runs a consumer of a Batcher on a fake clock: it reports each round (Wait returning
// true) on rounds, as the time since start, and then waits for proceed before it calls Wait
// again, like a controller doing its work.
type harness struct {
	t       *testing.T
	clock   *batchertest.Clock
	batcher *Batcher
	start   time.Time
	rounds  chan time.Duration
	proceed chan struct{}
}

// waitLimit bounds every wait for the consumer goroutine, in real time.
const waitLimit = 10 * time.Second

func newHarness(t *testing.T, idle, maxDuration, period time.Duration) *harness {
	t.Helper()
	start := time.Unix(1_000_000, 0)
	clk := batchertest.NewClock(start)
	h := &harness{
		t: t, clock: clk, start: start,
		batcher: &Batcher{Idle: idle, MaxDuration: maxDuration, Period: period, Clock: clk},
		rounds:  make(chan time.Duration, 1),
		proceed: make(chan struct{}),
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	t.Cleanup(func() {
		cancel()
		<-stopped
	})
	go func() {
		defer close(stopped)
		for h.batcher.Wait(ctx) {
			h.rounds <- clk.Since(start)
			select {
			case <-h.proceed:
			case <-ctx.Done():
				return
			}
		}
	}()
	return h
}

// expectArmed waits until Wait has set timers firing at these offsets from start.
func (h *harness) expectArmed(at ...time.Duration) {
	h.t.Helper()
	var got []time.Duration
	for range at {
		select {
		case fires := <-h.clock.Armed:
			got = append(got, fires.Sub(h.start))
		case <-time.After(waitLimit):
			h.t.Fatalf("timers armed %v, want %v", got, at)
		}
	}
	slices.Sort(got)
	want := slices.Sorted(slices.Values(at))
	if !slices.Equal(got, want) {
		h.t.Fatalf("timers armed at %v, want %v", got, want)
	}
}

// expectRound waits for a round and checks when it happened.
func (h *harness) expectRound(at time.Duration) {
	h.t.Helper()
	select {
	case got := <-h.rounds:
		if got != at {
			h.t.Fatalf("round at %v, want %v", got, at)
		}
	case <-time.After(waitLimit):
		h.t.Fatalf("no round; want one at %v", at)
	}
}

// expectNoRound checks that no round happened. Wait returns only when a timer it set fires, and
// the fake clock fires them only when the test steps past them, so this needs no waiting.
func (h *harness) expectNoRound() {
	h.t.Helper()
	select {
	case got := <-h.rounds:
		h.t.Fatalf("unexpected round at %v", got)
	default:
	}
}

func TestBatcher(t *testing.T) {
	tests := []struct {
		name string
		// triggers are the offsets at which Trigger is called after the first, at 0.
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
			h := newHarness(t, time.Second, 4*time.Second, 0)
			h.batcher.Trigger()
			h.expectArmed(4*time.Second, time.Second)
			// Step the fake clock in 250ms ticks, triggering where the case says.
			const tick = 250 * time.Millisecond
			next := 0
			for elapsed := time.Duration(0); elapsed < tt.want; elapsed += tick {
				h.expectNoRound()
				if next < len(tt.triggers) && elapsed == tt.triggers[next] {
					h.batcher.Trigger()
					h.expectArmed(elapsed + time.Second) // the idle timer is reset
					next++
				}
				h.clock.Step(tick)
			}
			h.expectRound(tt.want)
		})
	}
}

func TestBatcherTriggersBeforeWaitMakeOneBatch(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	clk := batchertest.NewClock(start)
	b := &Batcher{Idle: time.Second, MaxDuration: 4 * time.Second, Clock: clk}
	for range 5 {
		b.Trigger()
	}
	done := make(chan bool, 1)
	go func() { done <- b.Wait(context.Background()) }()
	for range 2 { // max and idle
		select {
		case <-clk.Armed:
		case <-time.After(waitLimit):
			t.Fatal("Wait set no timers")
		}
	}
	clk.Step(time.Second)
	select {
	case ok := <-done:
		if !ok {
			t.Fatal("Wait reported no batch")
		}
	case <-time.After(waitLimit):
		t.Fatal("the batch did not close after the idle time")
	}
	if len(b.trigger) != 0 {
		t.Error("triggers before Wait left a trigger pending: they should make one batch")
	}
}

func TestBatcherPeriod(t *testing.T) {
	const (
		idle   = time.Second
		maxDur = 4 * time.Second
		period = 30 * time.Second
	)
	tests := []struct {
		name string
		run  func(h *harness)
	}{
		{
			name: "a round every period without triggers",
			run: func(h *harness) {
				h.expectArmed(period)
				h.clock.Step(period - time.Second)
				h.expectNoRound()
				h.clock.Step(time.Second)
				h.expectRound(period)
				h.proceed <- struct{}{}
				h.expectArmed(2 * period)
				h.clock.Step(period)
				h.expectRound(2 * period)
			},
		},
		{
			name: "a batch closing after a periodic time covers it",
			run: func(h *harness) {
				h.expectArmed(period)
				h.clock.Step(period - 500*time.Millisecond)
				h.batcher.Trigger()
				h.expectArmed(period-500*time.Millisecond+maxDur, period+500*time.Millisecond)
				h.clock.Step(idle)
				h.expectRound(period + 500*time.Millisecond)
				h.proceed <- struct{}{}
				h.expectArmed(2 * period) // not at once: the batch was this period's round
			},
		},
		{
			name: "a batch closing before a periodic time does not move it",
			run: func(h *harness) {
				h.expectArmed(period)
				h.batcher.Trigger()
				h.expectArmed(maxDur, idle)
				h.clock.Step(idle)
				h.expectRound(idle)
				h.proceed <- struct{}{}
				h.expectArmed(period)
				h.clock.Step(period - idle)
				h.expectRound(period)
			},
		},
		{
			name: "a periodic time missed while working gives one round at once",
			run: func(h *harness) {
				h.expectArmed(period)
				h.clock.Step(period)
				h.expectRound(period)
				// The round's work takes two and a half periods.
				h.clock.Step(2*period + period/2)
				h.proceed <- struct{}{}
				h.expectRound(3*period + period/2)
				h.proceed <- struct{}{}
				h.expectArmed(4 * period)
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.run(newHarness(t, idle, maxDur, period))
		})
	}
}

func TestBatcherStopsWithContext(t *testing.T) {
	tests := []struct {
		name    string
		batcher *Batcher
		trigger bool
	}{
		{name: "idle", batcher: &Batcher{Idle: time.Hour, MaxDuration: time.Hour}},
		{name: "triggered", batcher: &Batcher{Idle: time.Hour, MaxDuration: time.Hour}, trigger: true},
		{name: "periodic", batcher: &Batcher{Idle: time.Hour, MaxDuration: time.Hour, Period: time.Hour}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.trigger {
				tt.batcher.Trigger()
			}
			ctx, cancel := context.WithCancel(context.Background())
			cancel()
			if tt.batcher.Wait(ctx) {
				t.Fatal("Wait reported a batch after the context ended")
			}
		})
	}
}

func TestBatcherStopsWhileWaiting(t *testing.T) {
	clk := batchertest.NewClock(time.Unix(1_000_000, 0))
	b := &Batcher{Idle: time.Second, MaxDuration: time.Minute, Clock: clk}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan bool, 1)
	go func() { done <- b.Wait(ctx) }()
	b.Trigger()
	for range 2 { // max and idle
		select {
		case <-clk.Armed:
		case <-time.After(waitLimit):
			t.Fatal("Wait set no timers")
		}
	}
	cancel()
	select {
	case ok := <-done:
		if ok {
			t.Fatal("Wait reported a batch after the context ended")
		}
	case <-time.After(waitLimit):
		t.Fatal("Wait did not return after the context ended")
	}
}
