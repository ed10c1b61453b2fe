package local

import (
	"errors"
	"sync"
	"testing"
)

func TestShortageMatches(t *testing.T) {
	for _, tc := range []struct {
		name                   string
		shortage               Shortage
		it, zone, capacityType string
		want                   bool
	}{
		{"type only matches every offering of the type", Shortage{InstanceType: "m5.large"}, "m5.large", "us-east-1a", "spot", true},
		{"type only does not match another type", Shortage{InstanceType: "m5.large"}, "m5.xlarge", "us-east-1a", "spot", false},
		{"type and zone", Shortage{InstanceType: "m5.large", Zone: "us-east-1a"}, "m5.large", "us-east-1a", "on-demand", true},
		{"type and other zone", Shortage{InstanceType: "m5.large", Zone: "us-east-1b"}, "m5.large", "us-east-1a", "on-demand", false},
		{"type, zone and capacity type", Shortage{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot"}, "m5.large", "us-east-1a", "spot", true},
		{"other capacity type", Shortage{InstanceType: "m5.large", Zone: "us-east-1a", CapacityType: "spot"}, "m5.large", "us-east-1a", "on-demand", false},
		{"whole zone", Shortage{Zone: "us-east-1c"}, "c5.large", "us-east-1c", "on-demand", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &Failures{}
			f.AddInsufficientCapacity(tc.shortage)
			if got := f.short(tc.it, tc.zone, tc.capacityType, false); got != tc.want {
				t.Errorf("short(%s, %s, %s) = %t, want %t", tc.it, tc.zone, tc.capacityType, got, tc.want)
			}
			hidden := tc.shortage
			hidden.Unannounced = true
			f.Reset()
			f.AddInsufficientCapacity(hidden)
			if f.short(tc.it, tc.zone, tc.capacityType, true) {
				t.Errorf("an unannounced shortage shows in the announced view")
			}
			if got := f.short(tc.it, tc.zone, tc.capacityType, false); got != tc.want {
				t.Errorf("unannounced short(...) = %t at launch, want %t", got, tc.want)
			}
		})
	}
}

func TestFailuresLifecycle(t *testing.T) {
	f := &Failures{}
	v0 := f.shortageVersion()
	s := Shortage{InstanceType: "m5.large"}
	f.AddInsufficientCapacity(s, s)
	if got := f.InsufficientCapacity(); len(got) != 1 {
		t.Errorf("adding the same shortage twice gave %v", got)
	}
	if f.shortageVersion() == v0 {
		t.Errorf("the shortage version did not change on add")
	}
	f.RemoveInsufficientCapacity(s)
	if f.short("m5.large", "us-east-1a", "spot", false) {
		t.Errorf("shortage still applies after removal")
	}

	custom := errors.New("boom")
	f.FailLaunches(2, custom)
	for i := range 2 {
		failed, err := f.takeLaunchFailure()
		if !failed || !errors.Is(err, custom) {
			t.Errorf("launch %d: failed=%t err=%v, want the injected error", i, failed, err)
		}
	}
	if failed, _ := f.takeLaunchFailure(); failed {
		t.Errorf("a third launch failed after FailLaunches(2)")
	}
	f.FailLaunches(5, nil)
	f.FailLaunches(0, nil)
	if n := f.PendingLaunchFailures(); n != 0 {
		t.Errorf("FailLaunches(0) left %d pending failures", n)
	}

	f.NeverRegister("t3.micro", "t3.small")
	if f.registers("t3.micro") || f.registers("t3.small") || !f.registers("m5.large") {
		t.Errorf("NeverRegister applies to the wrong types")
	}
	f.AllowRegister("t3.small")
	if f.registers("t3.micro") || !f.registers("t3.small") {
		t.Errorf("AllowRegister undid the wrong types")
	}
	f.FailLaunches(1, nil)
	f.AddInsufficientCapacity(s)
	f.Reset()
	if failed, _ := f.takeLaunchFailure(); failed || !f.registers("t3.micro") || f.short("m5.large", "z", "spot", false) {
		t.Errorf("Reset left failures behind")
	}
}

// TestFailuresConcurrentUse exercises the failures from many goroutines (meaningful under -race)
// and checks that exactly the injected number of launches fail.
func TestFailuresConcurrentUse(t *testing.T) {
	f := &Failures{}
	f.FailLaunches(50, nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	failures := 0
	for i := range 100 {
		wg.Go(func() {
			s := Shortage{InstanceType: "m5.large", Zone: "us-east-1a"}
			f.AddInsufficientCapacity(s)
			_ = f.short("m5.large", "us-east-1a", "spot", i%2 == 0)
			f.NeverRegister("t3.micro")
			_ = f.registers("t3.micro")
			if failed, _ := f.takeLaunchFailure(); failed {
				mu.Lock()
				failures++
				mu.Unlock()
			}
			f.RemoveInsufficientCapacity(s)
		})
	}
	wg.Wait()
	if failures != 50 {
		t.Errorf("%d launches failed, want 50", failures)
	}
}
