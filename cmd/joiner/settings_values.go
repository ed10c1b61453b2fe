package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.uber.org/zap/zapcore"
)

// The parsers of the settings table: each returns a row's apply, which parses a value, checks it
// and stores it. Their errors say what value is wanted; the caller names the flag or variable.

// boolSetting takes true or false only, as Karpenter does.
func boolSetting(store func(f *controllerFlags, b bool)) func(*controllerFlags, string) error {
	return func(f *controllerFlags, v string) error {
		switch v {
		case "true":
			store(f, true)
		case "false":
			store(f, false)
		default:
			return fmt.Errorf("want true or false")
		}
		return nil
	}
}

// intSetting takes a whole number in [lo, hi].
func intSetting(lo, hi int64, store func(f *controllerFlags, n int64)) func(*controllerFlags, string) error {
	return func(f *controllerFlags, v string) error {
		n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		if err != nil {
			hint := ""
			if strings.Contains(v, "://") {
				hint = " (this looks like the service link variable Kubernetes adds for a Service of that name: " +
					"set enableServiceLinks: false on the pod, or give the flag)"
			}
			return fmt.Errorf("want a whole number%s", hint)
		}
		if n < lo || n > hi {
			return fmt.Errorf("want a whole number from %d to %d", lo, hi)
		}
		store(f, n)
		return nil
	}
}

// floatSetting takes a number of 0 or more.
func floatSetting(store func(f *controllerFlags, x float64)) func(*controllerFlags, string) error {
	return func(f *controllerFlags, v string) error {
		x, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
		if err != nil || x < 0 {
			return fmt.Errorf("want a number of 0 or more, such as 0.075")
		}
		store(f, x)
		return nil
	}
}

// durationSetting takes a Go duration of at least least.
func durationSetting(least time.Duration, store func(f *controllerFlags, d time.Duration)) func(*controllerFlags, string) error {
	return func(f *controllerFlags, v string) error {
		d, err := time.ParseDuration(strings.TrimSpace(v))
		if err != nil {
			return fmt.Errorf("want a duration such as 10s, 500ms or 1m")
		}
		if d < least {
			return fmt.Errorf("want a duration of at least %s", least)
		}
		store(f, d)
		return nil
	}
}

// enumSetting takes one of values, spelled as Karpenter spells it.
func enumSetting(store func(f *controllerFlags, v string), values ...string) func(*controllerFlags, string) error {
	return func(f *controllerFlags, v string) error {
		if !slices.Contains(values, v) {
			return fmt.Errorf("want %s%s", strings.Join(values, " or "), nearestHint(v, values))
		}
		store(f, v)
		return nil
	}
}

// listSetting takes a comma-separated list of non-empty items.
func listSetting(store func(f *controllerFlags, l []string)) func(*controllerFlags, string) error {
	return func(f *controllerFlags, v string) error {
		var out []string
		for _, item := range strings.Split(v, ",") {
			if item = strings.TrimSpace(item); item != "" {
				out = append(out, item)
			}
		}
		if len(out) == 0 {
			return fmt.Errorf("want one or more comma-separated outputs, such as stdout")
		}
		store(f, out)
		return nil
	}
}

// applyLogLevel takes debug, info or error (any case).
func applyLogLevel(f *controllerFlags, v string) error {
	level, err := zapcore.ParseLevel(strings.ToLower(v))
	if err != nil || (level != zapcore.DebugLevel && level != zapcore.InfoLevel && level != zapcore.ErrorLevel) {
		return fmt.Errorf("use debug, info or error")
	}
	f.logLevel = level
	return nil
}
