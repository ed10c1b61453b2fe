package main

import (
	"context"
	"fmt"
	"io"
	"time"
)

// stopGrace is how long a command that reads input may take to return on its own once a signal has
// cancelled its context. Reads stop between chunks and documents within milliseconds; what cannot be
// interrupted (parsing one huge YAML document, a policy evaluation in progress) is abandoned after it.
const stopGrace = 300 * time.Millisecond

// untilStopped runs command, one of the commands that read input (check, convert, policy, disruption),
// and returns its exit code. Once ctx is done (SIGINT or SIGTERM, see main) it waits at most stopGrace
// more: a command that fails by then, or is still running, is reported stopped, with the signal, as the
// last line on stderr; one still running is left to end with the process, and the exit code is 1. So a
// signal ends these commands within a second, whatever they are doing. The controller is not run through
// it: it shuts down gracefully, at its own pace.
func untilStopped(ctx context.Context, stderr io.Writer, name string, command func() int) int {
	done := make(chan int, 1)
	go func() { done <- command() }()
	select {
	case code := <-done:
		return reportStopped(ctx, stderr, name, code)
	case <-ctx.Done():
	}
	grace := time.NewTimer(stopGrace)
	defer grace.Stop()
	select {
	case code := <-done:
		return reportStopped(ctx, stderr, name, code)
	case <-grace.C:
		fmt.Fprintf(stderr, "%s: stopped: %v; the work in progress was abandoned\n", name, context.Cause(ctx))
		return 1
	}
}

// reportStopped adds the last line that says a failed command was stopped, when ctx is done, and returns
// code.
func reportStopped(ctx context.Context, stderr io.Writer, name string, code int) int {
	if code != 0 && ctx.Err() != nil {
		fmt.Fprintf(stderr, "%s: stopped: %v\n", name, context.Cause(ctx))
	}
	return code
}
