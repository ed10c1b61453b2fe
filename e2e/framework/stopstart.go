package framework

import (
	"context"
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/joiner-dev/joiner/localrun"
)

// StopJoiner stops Joiner and leaves the cluster without it until StartJoiner, so that a test
// can set up what another controller (Karpenter, before Joiner took over) left behind without
// Joiner acting on it halfway.
func (c *Cluster) StopJoiner(ctx context.Context) error {
	if c.Joiner == nil {
		return errors.New("stop Joiner: it is not running")
	}
	err := c.Joiner.Stop(ctx)
	c.Joiner = nil
	if err != nil {
		return fmt.Errorf("stop Joiner: %w", err)
	}
	return nil
}

// StartJoiner starts Joiner after StopJoiner, with the options it first ran with, as a newly
// installed process: empty metrics (in the registry it returns) and nothing kept in memory.
func (c *Cluster) StartJoiner(ctx context.Context) (*prometheus.Registry, error) {
	if c.Joiner != nil {
		return nil, errors.New("start Joiner: it is running already")
	}
	reg := prometheus.NewRegistry()
	opts := c.opts
	opts.Operator.Registerer = reg
	opts.Operator.SkipControllerNameValidation = true
	run, err := localrun.Start(ctx, c.Env.Config, opts)
	if err != nil {
		return nil, fmt.Errorf("start Joiner (logs in %s): %w", c.Env.LogDir, err)
	}
	c.Joiner = run
	return reg, nil
}
