package aws

import (
	"context"
	"errors"
	"testing"
	"time"

	clocktesting "k8s.io/utils/clock/testing"
)

// TestInstanceCache: a description is reused within the TTL and fetched again after it; a failed
// lookup is not cached.
func TestInstanceCache(t *testing.T) {
	clk := clocktesting.NewFakeClock(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	c := newInstanceCache(clk, time.Minute)
	calls := 0
	fail := false
	describe := func(_ context.Context, id string) (*instance, error) {
		calls++
		if fail {
			return nil, errors.New("throttled")
		}
		return &instance{ID: id}, nil
	}
	steps := []struct {
		name      string
		advance   time.Duration
		fail      bool
		id        string
		wantCalls int
		wantErr   bool
	}{
		{name: "first lookup describes", id: "i-1", wantCalls: 1},
		{name: "within the TTL it is reused", advance: 59 * time.Second, id: "i-1", wantCalls: 1},
		{name: "another instance describes", id: "i-2", wantCalls: 2},
		{name: "after the TTL it describes again", advance: time.Second, id: "i-1", wantCalls: 3},
		{name: "a failure is returned", advance: time.Minute, fail: true, id: "i-1", wantCalls: 4, wantErr: true},
		{name: "and not cached", id: "i-1", wantCalls: 5},
	}
	for _, s := range steps {
		clk.Step(s.advance)
		fail = s.fail
		inst, err := c.get(context.Background(), s.id, describe)
		if (err != nil) != s.wantErr || calls != s.wantCalls {
			t.Fatalf("%s: err %v, %d calls; want error %v, %d calls", s.name, err, calls, s.wantErr, s.wantCalls)
		}
		if err == nil && inst.ID != s.id {
			t.Fatalf("%s: got instance %s, want %s", s.name, inst.ID, s.id)
		}
	}
}
