package framework

import (
	"context"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

// Sampler checks an invariant every 200 ms in the background until Finish, and keeps the first
// violation.
type Sampler struct {
	stop    chan struct{}
	done    sync.WaitGroup
	mu      sync.Mutex
	failure string
	samples int
}

// Sample starts checking check, which returns "" while the invariant holds and a description of
// the violation otherwise.
func Sample(check func(ctx context.Context) string) *Sampler {
	s := &Sampler{stop: make(chan struct{})}
	s.done.Add(1)
	go func() {
		defer s.done.Done()
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			msg := check(ctx)
			cancel()
			s.mu.Lock()
			s.samples++
			if msg != "" && s.failure == "" {
				s.failure = msg
			}
			s.mu.Unlock()
		}
	}()
	return s
}

// Finish stops the sampler and fails the test on a recorded violation, or when it never sampled.
func (s *Sampler) Finish(t *testing.T, what string) {
	t.Helper()
	close(s.stop)
	s.done.Wait()
	if s.failure != "" {
		t.Fatalf("%s: %s", what, s.failure)
	}
	if s.samples == 0 {
		t.Fatalf("%s: never sampled", what)
	}
	t.Logf("%s held over %d samples", what, s.samples)
}

// Hold checks check every 200 ms for d (the window over which the invariant must hold, such as
// "changing limits drifts nothing for 10 s"; at least a second), in the test's goroutine, and
// fails the test on the first violation.
func Hold(t *testing.T, d time.Duration, what string, check func(ctx context.Context) string) {
	t.Helper()
	samples := 0
	var violation string
	err := wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, max(d, time.Second), true, func(ctx context.Context) (bool, error) {
		samples++
		violation = check(ctx)
		return violation != "", nil
	})
	if err == nil {
		t.Fatalf("%s: %s", what, violation)
	}
	if !wait.Interrupted(err) {
		t.Fatalf("%s: %v", what, err)
	}
	t.Logf("%s held over %d samples", what, samples)
}
