package defaults

import (
	"testing"
	"time"
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
