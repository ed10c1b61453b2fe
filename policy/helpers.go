package policy

import "time"

// helperIdle is how long an idle helper goroutine waits for more work before it exits.
const helperIdle = 5 * time.Second

// helperPool runs the extra workers of an engine's parallel evaluations on recycled goroutines. OPA's
// evaluator recurses deeply, so a fresh goroutine per Evaluate grew (copied) its stack several times on
// every call; a helper keeps its grown stack between evaluations. Helpers exit after helperIdle without
// work, so an idle engine holds none.
type helperPool struct {
	jobs chan func() // unbuffered: a send succeeds only when a helper is waiting
}

func newHelperPool() *helperPool { return &helperPool{jobs: make(chan func())} }

// run runs f on an idle helper, or on a new one if none is waiting. It does not wait for f.
func (p *helperPool) run(f func()) {
	select {
	case p.jobs <- f:
	default:
		go p.loop(f)
	}
}

func (p *helperPool) loop(f func()) {
	f()
	idle := time.NewTimer(helperIdle)
	defer idle.Stop()
	for {
		select {
		case f := <-p.jobs:
			f()
			idle.Reset(helperIdle)
		case <-idle.C:
			return
		}
	}
}
