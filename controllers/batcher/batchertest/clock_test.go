package batchertest

import (
	"slices"
	"testing"
	"time"
)

func TestClockReportsTimers(t *testing.T) {
	start := time.Unix(1_000_000, 0)
	tests := []struct {
		name string
		// set sets timers on the clock.
		set  func(c *Clock)
		want []time.Duration // firing times reported, as offsets from start
	}{
		{name: "new timer", set: func(c *Clock) { c.NewTimer(time.Second) }, want: []time.Duration{time.Second}},
		{
			name: "reset after a step",
			set: func(c *Clock) {
				timer := c.NewTimer(time.Second)
				c.Step(500 * time.Millisecond)
				timer.Reset(time.Second)
			},
			want: []time.Duration{time.Second, 1500 * time.Millisecond},
		},
		{name: "no timer", set: func(c *Clock) { c.Step(time.Hour) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := NewClock(start)
			tt.set(c)
			close(c.Armed)
			var got []time.Duration
			for fires := range c.Armed {
				got = append(got, fires.Sub(start))
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("reported %v, want %v", got, tt.want)
			}
		})
	}
}

func TestClockTimerFires(t *testing.T) {
	c := NewClock(time.Unix(1_000_000, 0))
	timer := c.NewTimer(time.Second)
	<-c.Armed
	c.Step(time.Second)
	select {
	case <-timer.C():
	default:
		t.Fatal("the timer did not fire when the clock reached it")
	}
}
