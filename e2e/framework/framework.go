// Package framework starts what the e2e tests run against: a local control plane from the test
// bed, and Joiner in-process on it (localrun), logging to a file beside the control plane's logs.
// It holds no assertions; the e2e packages do.
package framework

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/go-logr/logr/funcr"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apischeme "github.com/joiner-dev/joiner/api/scheme"
	"github.com/joiner-dev/joiner/localrun"
	"github.com/joiner-dev/joiner/operator"
	"github.com/joiner-dev/joiner/testbed"
)

// Cluster is a running control plane with Joiner on it.
type Cluster struct {
	Env    *testbed.Env
	Joiner *localrun.Run
	// Client is an admin client with Joiner's scheme.
	Client  client.Client
	logFile *os.File
	opts    localrun.Options
}

// Start brings up the control plane described by bed (its CRDDirs default to config/crd/bases,
// relative to an e2e package) and runs Joiner on it with opts.
func Start(ctx context.Context, bed testbed.Options, opts operator.Options) (_ *Cluster, err error) {
	if len(bed.CRDDirs) == 0 {
		bed.CRDDirs = []string{filepath.Join("..", "..", "config", "crd", "bases")}
	}
	c := &Cluster{}
	if c.Env, err = testbed.Start(ctx, bed); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			_ = c.Stop()
		}
	}()
	if c.logFile, err = os.Create(filepath.Join(c.Env.LogDir, "joiner.log")); err != nil {
		return nil, fmt.Errorf("create Joiner's log: %w", err)
	}
	f := c.logFile
	log := funcr.New(func(prefix, args string) { fmt.Fprintln(f, time.Now().Format(time.RFC3339Nano), prefix, args) }, funcr.Options{Verbosity: 1})
	c.opts = localrun.Options{Operator: opts, Log: log}
	if c.Joiner, err = localrun.Start(ctx, c.Env.Config, c.opts); err != nil {
		return nil, fmt.Errorf("start Joiner (logs in %s): %w", c.Env.LogDir, err)
	}
	scheme, err := apischeme.New()
	if err != nil {
		return nil, err
	}
	if c.Client, err = client.New(c.Env.Config, client.Options{Scheme: scheme}); err != nil {
		return nil, fmt.Errorf("client: %w", err)
	}
	return c, nil
}

// RestartJoiner stops Joiner and starts it again with the same options: what it kept in memory is
// lost, what it wrote to the API server is not, as after a crash.
func (c *Cluster) RestartJoiner(ctx context.Context) error {
	if err := c.Joiner.Stop(ctx); err != nil {
		return fmt.Errorf("stop Joiner: %w", err)
	}
	opts := c.opts
	// A process that restarts starts with empty metrics; so does this one.
	opts.Operator.Registerer = prometheus.NewRegistry()
	opts.Operator.SkipControllerNameValidation = true
	run, err := localrun.Start(ctx, c.Env.Config, opts)
	if err != nil {
		return fmt.Errorf("restart Joiner (logs in %s): %w", c.Env.LogDir, err)
	}
	c.Joiner = run
	return nil
}

// Stop stops Joiner, then the control plane, and reports what failed.
func (c *Cluster) Stop() error {
	var errs []error
	if c.Joiner != nil {
		if err := c.Joiner.Stop(context.Background()); err != nil {
			errs = append(errs, fmt.Errorf("stop Joiner: %w", err))
		}
	}
	if c.logFile != nil {
		_ = c.logFile.Close()
	}
	if c.Env != nil {
		if err := c.Env.Stop(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Main runs an e2e package's tests on a started cluster and returns the exit code; a failure
// says where the logs are.
func Main(run func() int, c *Cluster) int {
	code := run()
	if code != 0 {
		fmt.Fprintln(os.Stderr, "logs of Joiner and the control plane are in", c.Env.LogDir, "(set JOINER_TESTBED_KEEP=1 to keep them)")
	}
	if err := c.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		if code == 0 {
			code = 1
		}
	}
	return code
}

// Tools returns the test bed's kubectl and a joiner CLI built from ../../cmd/joiner (relative to an
// e2e package) into a temporary folder, which cleanup removes.
func Tools() (kubectl, joiner string, cleanup func(), err error) {
	assets, err := testbed.FindAssets("")
	if err != nil {
		return "", "", nil, err
	}
	bin, err := os.MkdirTemp("", "joiner-e2e-bin-")
	if err != nil {
		return "", "", nil, fmt.Errorf("folder for the joiner CLI: %w", err)
	}
	cleanup = func() { _ = os.RemoveAll(bin) }
	joiner = filepath.Join(bin, "joiner")
	if out, err := exec.Command("go", "build", "-o", joiner, "../../cmd/joiner").CombinedOutput(); err != nil {
		cleanup()
		return "", "", nil, fmt.Errorf("build joiner: %w\n%s", err, out)
	}
	return filepath.Join(assets, "kubectl"), joiner, cleanup, nil
}
