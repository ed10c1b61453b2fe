package audit_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/audit"
	"github.com/joiner-dev/joiner/policy"
	"github.com/joiner-dev/joiner/policy/policyobject"
)

const (
	// regoMalformed fails to evaluate for every object: its violations are not objects with a msg.
	regoMalformed = `violation contains 42 if {
	input.review.object.metadata.name
}`
	// regoInventory reads data.inventory, which runs that leave another policy out still see.
	regoInventory = `violation contains {"msg": sprintf("%d NodePools in the inventory", [count(data.inventory.cluster["karpenter.sh/v1"].NodePool)])} if {
	input.review.object.metadata.name == "np-00"
}`
)

// evaluationLog counts the evaluation failures the engines log, per policy.
type evaluationLog struct {
	mu       sync.Mutex
	failures map[string]int
}

func (l *evaluationLog) logger() logr.Logger {
	return funcr.New(func(_, args string) {
		if !strings.Contains(args, `"msg"="policy evaluation failed"`) {
			return
		}
		l.mu.Lock()
		defer l.mu.Unlock()
		for _, name := range []string{"malformed", "needs-team", "inventory"} {
			if strings.Contains(args, fmt.Sprintf(`"policy"=%q`, name)) {
				l.failures[name]++
			}
		}
	}, funcr.Options{})
}

func (l *evaluationLog) count(name string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.failures[name]
}

// TestAuditBacksOffFailingPolicies runs the audit on the fake clock over a policy whose evaluation
// always fails, beside healthy ones: it is left out for 2, 4, 8, ... intervals, capped, without the
// engine running it (no failure logged), keeps its last status and gauge meanwhile, gets one Event per
// wait, and a new generation of it is audited at once. The healthy policies, one of them reading the
// inventory, are audited every run.
func TestAuditBacksOffFailingPolicies(t *testing.T) {
	ctx := context.Background()
	policies := []*v1alpha1.ProvisioningPolicy{
		provisioningPolicy("malformed", v1alpha1.EnforcementDeny, []string{"NodePool"}, regoMalformed),
		provisioningPolicy("needs-team", v1alpha1.EnforcementDeny, []string{"NodePool"}, regoNeedsTeam),
		provisioningPolicy("inventory", v1alpha1.EnforcementWarn, []string{"NodePool"}, regoInventory),
	}
	np := nodePool("np-00", nil)
	f := newFixture(t, policies, []client.Object{np})
	log := &evaluationLog{failures: map[string]int{}}
	f.engine = policy.New(policy.Options{Logger: log.logger()})
	var compiled []policy.Policy
	for _, pp := range policies {
		p, err := policyobject.ToPolicy(pp)
		if err != nil {
			t.Fatal(err)
		}
		compiled = append(compiled, p)
	}
	if err := f.engine.SetPolicies(ctx, compiled); err != nil {
		t.Fatal(err)
	}
	inv, err := policy.ObjectToMap(np, karpv1.GroupVersion.WithKind("NodePool"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.engine.SetInventory(ctx, []map[string]any{inv}); err != nil {
		t.Fatal(err)
	}
	f.auditor.Engine = f.engine
	f.auditor.Log = log.logger()
	f.auditor.Interval = time.Minute
	f.auditor.MaxErrorBackoff = 10 * time.Minute

	fix := func(t *testing.T) {
		pp := &v1alpha1.ProvisioningPolicy{}
		if err := f.client.Get(ctx, client.ObjectKey{Name: "malformed"}, pp); err != nil {
			t.Fatal(err)
		}
		pp.Spec.Rego = strings.Replace(pp.Spec.Rego, "violation contains 42", `violation contains {"msg": "fixed"}`, 1)
		pp.Generation++
		if err := f.client.Update(ctx, pp); err != nil {
			t.Fatal(err)
		}
		p, err := policyobject.ToPolicy(pp)
		if err != nil {
			t.Fatal(err)
		}
		if err := f.engine.UpsertPolicy(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	// Every step advances the clock by after (from the start of the test: at), then runs the audit.
	steps := []struct {
		at        time.Duration
		change    func(t *testing.T)
		evaluated bool   // whether the engine ran "malformed"
		event     string // the AuditBackoff Event, "" for none
		message   string // of malformed's one violation
	}{
		{at: 0, evaluated: true, message: "evaluation error"},
		{at: time.Minute, event: "failed in 1 consecutive audit(s) (NodePool np-00: ", message: "evaluation error"},
		{at: 2 * time.Minute, evaluated: true, message: "evaluation error"},
		{at: 3 * time.Minute, event: "failed in 2 consecutive audit(s)", message: "evaluation error"},
		{at: 5 * time.Minute, message: "evaluation error"},
		{at: 6 * time.Minute, evaluated: true, message: "evaluation error"},
		{at: 14 * time.Minute, evaluated: true, message: "evaluation error"},
		// 16 minutes after the fourth failure, capped at 10.
		{at: 23 * time.Minute, event: "failed in 4 consecutive audit(s)", message: "evaluation error"},
		{at: 24 * time.Minute, evaluated: true, message: "evaluation error"},
		{at: 25 * time.Minute, change: fix, evaluated: true, message: "fixed"},
		{at: 26 * time.Minute, evaluated: true, message: "fixed"},
	}
	lastEvaluated := auditTime
	for _, step := range steps {
		t.Run(fmt.Sprintf("at %v", step.at), func(t *testing.T) {
			if step.change != nil {
				step.change(t)
			}
			now := auditTime.Add(step.at)
			f.clock.Step(now.Sub(f.clock.Now()))
			before := log.count("malformed")
			if err := f.auditor.RunOnce(ctx); err != nil {
				t.Fatalf("RunOnce: %v", err)
			}
			// A failing evaluation logs its failure; a fixed policy's shows in its auditTimestamp below.
			if ran := log.count("malformed") > before; step.message != "fixed" && ran != step.evaluated {
				t.Errorf("the engine ran malformed: %v, want %v", ran, step.evaluated)
			}
			if step.evaluated {
				lastEvaluated = now
			}
			st := f.status(t, "malformed")
			if st.AuditTimestamp == nil || !st.AuditTimestamp.Time.Equal(lastEvaluated) {
				t.Errorf("malformed auditTimestamp %v, want %v (its last evaluation)", st.AuditTimestamp, lastEvaluated)
			}
			if st.TotalViolations != 1 || len(st.Violations) != 1 || !strings.Contains(st.Violations[0].Message, step.message) {
				t.Errorf("malformed status %d %+v, want one violation with %q", st.TotalViolations, st.Violations, step.message)
			}
			for name, want := range map[string]string{"needs-team": "no team label", "inventory": "1 NodePools in the inventory"} {
				st := f.status(t, name)
				if st.AuditTimestamp == nil || !st.AuditTimestamp.Time.Equal(now) || len(st.Violations) != 1 || st.Violations[0].Message != want {
					t.Errorf("%s: audited at %v with %+v, want at %v with %q", name, st.AuditTimestamp, st.Violations, now, want)
				}
			}
			if g := f.violationGauges(t); g["malformed/Deny"] != 1 || g["needs-team/Deny"] != 1 || g["inventory/Warn"] != 1 {
				t.Errorf("joiner_audit_violations %v, want 1 for every policy", g)
			}
			var backoffEvents []string
			for _, e := range f.events() {
				if strings.Contains(e, audit.ReasonAuditBackoff) {
					backoffEvents = append(backoffEvents, e)
				}
			}
			switch {
			case step.event == "" && len(backoffEvents) > 0:
				t.Errorf("unexpected Events %q", backoffEvents)
			case step.event != "" && (len(backoffEvents) != 1 || !strings.Contains(backoffEvents[0], step.event)):
				t.Errorf("Events %q, want one %s Event with %q", backoffEvents, audit.ReasonAuditBackoff, step.event)
			}
		})
	}
}

func TestAuditErrorBackoffDefaults(t *testing.T) {
	tests := []struct {
		name                      string
		interval, base, limit     time.Duration
		wantFirstWait, wantCapped time.Duration
	}{
		{name: "defaults: twice the interval, capped at 30m", wantFirstWait: 2 * audit.DefaultInterval, wantCapped: audit.DefaultMaxErrorBackoff},
		{name: "set explicitly", interval: time.Hour, base: 3 * time.Minute, limit: 5 * time.Minute, wantFirstWait: 3 * time.Minute, wantCapped: 5 * time.Minute},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t, []*v1alpha1.ProvisioningPolicy{
				provisioningPolicy("malformed", v1alpha1.EnforcementDeny, []string{"NodePool"}, regoMalformed),
			}, []client.Object{nodePool("np-00", nil)})
			f.auditor.Interval, f.auditor.ErrorBackoff, f.auditor.MaxErrorBackoff = tc.interval, tc.base, tc.limit
			ctx := context.Background()
			// The first wait, then enough failing runs to reach the cap.
			next := func() time.Duration {
				t.Helper()
				start := f.clock.Now()
				if err := f.auditor.RunOnce(ctx); err != nil {
					t.Fatal(err)
				}
				for wait := time.Second; ; wait += time.Second {
					f.clock.Step(time.Second)
					_ = f.events()
					if err := f.auditor.RunOnce(ctx); err != nil {
						t.Fatal(err)
					}
					if st := f.status(t, "malformed"); st.AuditTimestamp.Time.Equal(f.clock.Now()) {
						return f.clock.Now().Sub(start)
					}
					if wait > 2*time.Hour {
						t.Fatal(errors.New("the policy was never audited again"))
					}
				}
			}
			if got := next(); got != tc.wantFirstWait {
				t.Errorf("first wait %v, want %v", got, tc.wantFirstWait)
			}
			var got time.Duration
			for range 8 {
				got = next()
			}
			if got != tc.wantCapped {
				t.Errorf("capped wait %v, want %v", got, tc.wantCapped)
			}
		})
	}
}
