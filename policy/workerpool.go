package policy

import "time"

// workerIdle is how long an idle worker goroutine waits for more work before it exits.
const workerIdle = 5 * time.Second

// workerPool runs the extra workers of an engine's parallel evaluations on recycled goroutines. OPA's
// evaluator recurses deeply, so a fresh goroutine per Evaluate grew (copied) its stack several times on
// every call; a worker keeps its grown stack between evaluations. Workers exit after workerIdle without
// work, so an idle engine holds none.
type workerPool struct {
	jobs chan func() // unbuffered: a send succeeds only when a worker is waiting
}

func newWorkerPool() *workerPool { return &workerPool{jobs: make(chan func())} }

// run runs f on an idle worker, or on a new one if none is waiting. It does not wait for f.
func (p *workerPool) run(f func()) {
	select {
	case p.jobs <- f:
	default:
		go p.loop(f)
	}
}

func (p *workerPool) loop(f func()) {
	f()
	idle := time.NewTimer(workerIdle)
	defer idle.Stop()
	for {
		select {
		case f := <-p.jobs:
			f()
			idle.Reset(workerIdle)
		case <-idle.C:
			return
		}
	}
}
