package testbed

import (
	"context"
	"testing"

	"github.com/go-logr/logr/testr"
)

// StartForTest starts a control plane for t and stops it when t and its subtests end, also
// when they fail or panic. It fails t at once if the control plane does not come up.
func StartForTest(t testing.TB, opts Options) *Env {
	t.Helper()
	if opts.Log.GetSink() == nil {
		opts.Log = testr.NewWithInterface(t, testr.Options{})
	}
	env, err := Start(context.Background(), opts)
	if err != nil {
		t.Fatalf("start test bed: %v", err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Errorf("stop test bed: %v", err)
		}
	})
	return env
}
