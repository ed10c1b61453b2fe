package config_test

import (
	"os"
	"testing"

	"github.com/go-logr/logr"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
)

// TestMain silences controller-runtime's own logger, which envtest (under testbed) logs to: without it,
// a run longer than 30 s prints a "log.SetLogger(...) was never called" stack trace.
func TestMain(m *testing.M) {
	ctrllog.SetLogger(logr.Discard())
	os.Exit(m.Run())
}
