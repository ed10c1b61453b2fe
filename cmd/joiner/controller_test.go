package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/funcr"

	"github.com/joiner-dev/joiner/operator"
	"github.com/joiner-dev/joiner/policy"
)

func TestControllerPolicyMemoryBudgetFlag(t *testing.T) {
	tests := []struct {
		name string
		args []string
		// want is operator.Options.PolicyMemoryBudget: bytes, or -1 when the budget is disabled.
		want int64
		// wantErr is in what the command printed on a bad value ("" when the value is good).
		wantErr string
	}{
		{name: "default", want: policy.DefaultMemoryBudget},
		{name: "mebibytes", args: []string{"--policy-memory-budget", "128Mi"}, want: 128 << 20},
		{name: "gibibytes with =", args: []string{"--policy-memory-budget=1Gi"}, want: 1 << 30},
		{name: "decimal megabytes", args: []string{"--policy-memory-budget", "500M"}, want: 500_000_000},
		{name: "plain bytes", args: []string{"--policy-memory-budget", "67108864"}, want: 64 << 20},
		{name: "fraction of a unit that is whole bytes", args: []string{"--policy-memory-budget", "1.5Gi"}, want: 3 << 29},
		{name: "surrounding spaces", args: []string{"--policy-memory-budget", " 256Mi "}, want: 256 << 20},
		{name: "zero disables", args: []string{"--policy-memory-budget", "0"}, want: -1},
		{name: "zero with a unit disables", args: []string{"--policy-memory-budget", "0Mi"}, want: -1},
		{name: "negative disables", args: []string{"--policy-memory-budget", "-1"}, want: -1},
		{name: "negative quantity disables", args: []string{"--policy-memory-budget", "-2Gi"}, want: -1},
		{name: "last one wins", args: []string{"--policy-memory-budget", "0", "--policy-memory-budget", "64Mi"}, want: 64 << 20},
		{name: "not a quantity", args: []string{"--policy-memory-budget", "lots"},
			wantErr: `invalid value "lots" for flag -policy-memory-budget: want a quantity of bytes such as 256Mi or 1Gi, or 0 to disable the budget: `},
		{name: "unknown unit", args: []string{"--policy-memory-budget", "256MB"},
			wantErr: `invalid value "256MB" for flag -policy-memory-budget: want a quantity of bytes`},
		{name: "empty", args: []string{"--policy-memory-budget="},
			wantErr: `invalid value "" for flag -policy-memory-budget`},
		{name: "milli suffix", args: []string{"--policy-memory-budget", "100m"},
			wantErr: "100m is not a whole number of bytes (a lower-case m means thousandths); write the budget in Mi or Gi, such as 256Mi"},
		{name: "fraction of a byte", args: []string{"--policy-memory-budget", "1048576.5"},
			wantErr: "is not a whole number of bytes"},
		{name: "unit left out", args: []string{"--policy-memory-budget", "256"},
			wantErr: "256 bytes is below the smallest budget, 1Mi, and would stop ordinary evaluations; give a unit, such as 256Mi, or 0 to disable the budget"},
		{name: "just under the smallest budget", args: []string{"--policy-memory-budget", "1023Ki"},
			wantErr: "1047552 bytes is below the smallest budget"},
		{name: "smallest budget", args: []string{"--policy-memory-budget", "1Mi"}, want: 1 << 20},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			f, err := parseControllerFlags(tt.args, &stderr)
			if tt.wantErr != "" {
				if !errors.Is(err, errBadFlags) {
					t.Fatalf("err = %v, want errBadFlags", err)
				}
				if !strings.Contains(stderr.String(), tt.wantErr) {
					t.Errorf("stderr lacks %q:\n%s", tt.wantErr, stderr.String())
				}
				if code := flagExit(err); code != 2 {
					t.Errorf("exit code %d, want 2", code)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v\n%s", err, stderr.String())
			}
			if got := f.opts.PolicyMemoryBudget; got != tt.want {
				t.Errorf("PolicyMemoryBudget = %d, want %d", got, tt.want)
			}
		})
	}
}

// The other flags still parse as before the flag parsing moved into parseControllerFlags.
func TestControllerFlags(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		check   func(t *testing.T, f controllerFlags)
		wantErr string
	}{
		{name: "defaults", check: func(t *testing.T, f controllerFlags) {
			if f.opts.WebhookPort != 9443 || !f.opts.LeaderElect || f.opts.CertMode != operator.CertModeSelfManaged || f.cloudProvider != "local" {
				t.Errorf("unexpected defaults: %+v, cloud provider %q", f.opts, f.cloudProvider)
			}
		}},
		{name: "tls 1.3 and debug logs", args: []string{"--tls-min-version", "1.3", "--log-level", "DEBUG"}, check: func(t *testing.T, f controllerFlags) {
			if f.opts.TLSMinVersion != 0x0304 || f.logLevel.String() != "debug" {
				t.Errorf("TLSMinVersion %#x, log level %s; want TLS 1.3 and debug", f.opts.TLSMinVersion, f.logLevel)
			}
		}},
		{name: "leader election timings default to controller-runtime's", check: func(t *testing.T, f controllerFlags) {
			o := f.opts
			if o.LeaseDuration != 15*time.Second || o.RenewDeadline != 10*time.Second || o.RetryPeriod != 2*time.Second {
				t.Errorf("lease %s, renew deadline %s, retry period %s; want 15s, 10s, 2s", o.LeaseDuration, o.RenewDeadline, o.RetryPeriod)
			}
		}},
		{name: "leader election timings", args: []string{"--leader-elect-lease-duration=30s", "--leader-elect-renew-deadline=20s", "--leader-elect-retry-period=4s"},
			check: func(t *testing.T, f controllerFlags) {
				o := f.opts
				if o.LeaseDuration != 30*time.Second || o.RenewDeadline != 20*time.Second || o.RetryPeriod != 4*time.Second {
					t.Errorf("lease %s, renew deadline %s, retry period %s; want 30s, 20s, 4s", o.LeaseDuration, o.RenewDeadline, o.RetryPeriod)
				}
			}},
		{name: "renew deadline not under the lease", args: []string{"--leader-elect-renew-deadline=15s"},
			wantErr: "joiner controller: --leader-elect-renew-deadline 15s must be shorter than --leader-elect-lease-duration 15s"},
		{name: "timings unchecked without leader election", args: []string{"--leader-elect=false", "--leader-elect-renew-deadline=15s"},
			check: func(t *testing.T, f controllerFlags) {
				if f.opts.LeaderElect {
					t.Error("leader election on, want off")
				}
			}},
		{name: "webhook certificate IPs", args: []string{"--webhook-cert-ips", "127.0.0.1, ::1"}, check: func(t *testing.T, f controllerFlags) {
			if got := (*ipListFlag)(&f.opts.WebhookIPs).String(); got != "127.0.0.1,::1" {
				t.Errorf("WebhookIPs = %s, want 127.0.0.1,::1", got)
			}
		}},
		{name: "bad webhook certificate IP", args: []string{"--webhook-cert-ips=127.0.0.1,localhost"},
			wantErr: `invalid value "127.0.0.1,localhost" for flag -webhook-cert-ips: "localhost" is not an IP address`},
		{name: "bad tls version", args: []string{"--tls-min-version", "1.0"}, wantErr: `joiner controller: --tls-min-version "1.0" is not supported; use 1.2 or 1.3`},
		{name: "bad log level", args: []string{"--log-level", "loud"}, wantErr: `joiner controller: --log-level "loud": use debug, info or error`},
		{name: "stray argument", args: []string{"now"}, wantErr: "joiner controller: unexpected arguments [now]"},
		{name: "unknown flag", args: []string{"--nope"}, wantErr: "flag provided but not defined: -nope"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var stderr bytes.Buffer
			f, err := parseControllerFlags(tt.args, &stderr)
			if tt.wantErr != "" {
				if !errors.Is(err, errBadFlags) || !strings.Contains(stderr.String(), tt.wantErr) {
					t.Fatalf("err = %v, stderr %q; want errBadFlags and %q", err, stderr.String(), tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("err = %v\n%s", err, stderr.String())
			}
			tt.check(t, f)
		})
	}
}

func TestControllerHelpDocumentsPolicyMemoryBudget(t *testing.T) {
	var stderr bytes.Buffer
	_, err := parseControllerFlags([]string{"--help"}, &stderr)
	if !errors.Is(err, flag.ErrHelp) || flagExit(err) != 0 {
		t.Fatalf("err = %v, want flag.ErrHelp and exit code 0", err)
	}
	for _, want := range []string{"-policy-memory-budget quantity", "as a quantity of bytes such as 256Mi or 1Gi",
		"0 or a negative value disables the budget", "(default 256Mi)"} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("--help lacks %q:\n%s", want, stderr.String())
		}
	}
}

func TestLogMemorySettings(t *testing.T) {
	env := map[string]string{"GOMEMLIMIT": "800MiB"}
	tests := []struct {
		name   string
		limit  int64
		source string
		err    error
		budget int64
		want   []string
		absent []string
	}{
		{
			name: "from the environment variable", limit: 966367641, source: operator.MemoryLimitEnv, budget: 256 << 20,
			want: []string{`"level"=0 "msg"="Go memory limit set to 90% of the container memory limit"`, `"source"="JOINER_MEMORY_LIMIT"`,
				`"goMemoryLimitBytes"=966367641`, `"policyMemoryBudgetBytes"=268435456`},
			absent: []string{"warning", "error"},
		},
		{
			name: "from the cgroup file, budget disabled", limit: 483183820, source: operator.CgroupMemoryMax, budget: -1,
			want: []string{`"source"="/sys/fs/cgroup/memory.max"`, `"goMemoryLimitBytes"=483183820`, `"policyMemoryBudget"="disabled"`},
		},
		{
			name: "set by GOMEMLIMIT", source: "GOMEMLIMIT", budget: 256 << 20,
			want:   []string{`"msg"="Go memory limit set by the GOMEMLIMIT environment variable"`, `"GOMEMLIMIT"="800MiB"`},
			absent: []string{"goMemoryLimitBytes"},
		},
		{
			name: "no container limit: the default", limit: operator.DefaultMemoryLimit, source: operator.MemoryLimitDefault, budget: 256 << 20,
			want: []string{`"msg"="no container memory limit found, so the Go runtime's soft memory limit is the default`,
				`"source"="default"`, `"goMemoryLimitBytes"=1073741824`},
			absent: []string{"warning", "error"},
		},
		{
			name: "no limit", source: "none", budget: 256 << 20,
			want: []string{`"msg"="no container memory limit found, so the Go runtime runs without a memory limit; set JOINER_MEMORY_LIMIT`,
				`"source"="none"`, `"goMemoryLimitBytes"=0`},
		},
		{
			name: "a source that cannot be read", limit: 0, source: "none", budget: 256 << 20,
			err:  fmt.Errorf(`JOINER_MEMORY_LIMIT="lots": quantities must match the regular expression`),
			want: []string{`"msg"="the container memory limit could not be read`, `"error"="JOINER_MEMORY_LIMIT=\"lots\"`, `"source"="none"`},
		},
		{
			name: "budget not below the limit", limit: 200 << 20, source: operator.MemoryLimitEnv, budget: 256 << 20,
			want: []string{`"msg"="warning: the policy memory budget is not below the Go memory limit`, "lower --policy-memory-budget"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out strings.Builder
			log := funcr.New(func(prefix, args string) { out.WriteString(args + "\n") }, funcr.Options{})
			logMemorySettings(log, func(k string) string { return env[k] }, tt.limit, tt.source, tt.err, tt.budget)
			for _, w := range tt.want {
				if !strings.Contains(out.String(), w) {
					t.Errorf("log lacks %s:\n%s", w, out.String())
				}
			}
			for _, a := range tt.absent {
				if strings.Contains(out.String(), a) {
					t.Errorf("log has %s:\n%s", a, out.String())
				}
			}
		})
	}
}
