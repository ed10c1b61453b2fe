package defaults

import (
	"testing"
	"time"

	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
)

func TestPositive(t *testing.T) {
	for _, tt := range []struct{ v, def, want int }{{0, 10, 10}, {-1, 10, 10}, {3, 10, 3}, {100, 10, 100}} {
		if got := Positive(tt.v, tt.def); got != tt.want {
			t.Errorf("Positive(%d, %d) = %d, want %d", tt.v, tt.def, got, tt.want)
		}
	}
	if got := Positive(time.Duration(0), time.Minute); got != time.Minute {
		t.Errorf("Positive(0, 1m) = %v, want 1m", got)
	}
	if got := Positive(2*time.Second, time.Minute); got != 2*time.Second {
		t.Errorf("Positive(2s, 1m) = %v, want 2s", got)
	}
}

func TestClock(t *testing.T) {
	if _, ok := Clock[clock.Clock](nil).(clock.RealClock); !ok {
		t.Error("Clock(nil) is not the real clock")
	}
	if _, ok := Clock[clock.PassiveClock](nil).(clock.RealClock); !ok {
		t.Error("Clock[PassiveClock](nil) is not the real clock")
	}
	fake := clocktesting.NewFakeClock(time.Unix(1, 0))
	if got := Clock[clock.Clock](fake); got != fake {
		t.Errorf("Clock(fake) = %v, want the fake clock", got)
	}
}
