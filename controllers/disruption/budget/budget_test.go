package budget

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

var (
	underutilized = karpv1.DisruptionReasonUnderutilized
	empty         = karpv1.DisruptionReasonEmpty
	drifted       = karpv1.DisruptionReasonDrifted
)

// noon is a Wednesday, 12:00 UTC.
var noon = time.Date(2025, time.June, 11, 12, 0, 0, 0, time.UTC)

func nodePool(budgets ...karpv1.Budget) *karpv1.NodePool {
	return &karpv1.NodePool{Spec: karpv1.NodePoolSpec{Disruption: karpv1.Disruption{Budgets: budgets}}}
}

func nodes(n string) karpv1.Budget { return karpv1.Budget{Nodes: n} }

func scheduled(n, schedule string, d time.Duration) karpv1.Budget {
	return karpv1.Budget{Nodes: n, Schedule: &schedule, Duration: &metav1.Duration{Duration: d}}
}

func forReasons(b karpv1.Budget, reasons ...karpv1.DisruptionReason) karpv1.Budget {
	b.Reasons = reasons
	if b.Reasons == nil {
		b.Reasons = []karpv1.DisruptionReason{}
	}
	return b
}

func TestAllowed(t *testing.T) {
	tests := []struct {
		name       string
		budgets    []karpv1.Budget
		reason     karpv1.DisruptionReason
		numNodes   int
		disrupting int
		now        time.Time
		wantValue  int
		want       int
	}{
		{name: "no budgets", numNodes: 10, wantValue: math.MaxInt32, want: math.MaxInt32},
		{name: "no budgets minus disrupting", numNodes: 10, disrupting: 3, wantValue: math.MaxInt32, want: math.MaxInt32 - 3},
		{name: "count", budgets: []karpv1.Budget{nodes("5")}, numNodes: 100, wantValue: 5, want: 5},
		{name: "count above node count", budgets: []karpv1.Budget{nodes("5")}, numNodes: 2, wantValue: 5, want: 5},
		{name: "count with leading zero", budgets: []karpv1.Budget{nodes("007")}, numNodes: 20, wantValue: 7, want: 7},
		{name: "count 0", budgets: []karpv1.Budget{nodes("0")}, numNodes: 10, wantValue: 0, want: 0},
		{name: "percent 0", budgets: []karpv1.Budget{nodes("0%")}, numNodes: 10, wantValue: 0, want: 0},
		{name: "10% of 0", budgets: []karpv1.Budget{nodes("10%")}, numNodes: 0, wantValue: 0, want: 0},
		{name: "10% of 1", budgets: []karpv1.Budget{nodes("10%")}, numNodes: 1, wantValue: 1, want: 1},
		{name: "10% of 9", budgets: []karpv1.Budget{nodes("10%")}, numNodes: 9, wantValue: 1, want: 1},
		{name: "10% of 10", budgets: []karpv1.Budget{nodes("10%")}, numNodes: 10, wantValue: 1, want: 1},
		{name: "10% of 11", budgets: []karpv1.Budget{nodes("10%")}, numNodes: 11, wantValue: 2, want: 2},
		{name: "33% of 3", budgets: []karpv1.Budget{nodes("33%")}, numNodes: 3, wantValue: 1, want: 1},
		{name: "100% of 7", budgets: []karpv1.Budget{nodes("100%")}, numNodes: 7, wantValue: 7, want: 7},
		{name: "disrupting subtracted", budgets: []karpv1.Budget{nodes("5")}, numNodes: 50, disrupting: 2, wantValue: 5, want: 3},
		{name: "disrupting equal", budgets: []karpv1.Budget{nodes("5")}, numNodes: 50, disrupting: 5, wantValue: 5, want: 0},
		{name: "disrupting clamped at 0", budgets: []karpv1.Budget{nodes("10%")}, numNodes: 10, disrupting: 4, wantValue: 1, want: 0},
		{
			name:     "min over several budgets",
			budgets:  []karpv1.Budget{nodes("10"), nodes("20%"), nodes("4")},
			numNodes: 30, wantValue: 4, want: 4,
		},
		{
			name:     "min over several budgets, percent smallest",
			budgets:  []karpv1.Budget{nodes("10"), nodes("20%"), nodes("50%")},
			numNodes: 30, wantValue: 6, want: 6,
		},
		{
			name:     "nil reasons apply to every reason",
			budgets:  []karpv1.Budget{nodes("3")},
			reason:   drifted,
			numNodes: 30, wantValue: 3, want: 3,
		},
		{
			name:     "matching reason applies",
			budgets:  []karpv1.Budget{nodes("10"), forReasons(nodes("2"), empty, drifted)},
			reason:   drifted,
			numNodes: 30, wantValue: 2, want: 2,
		},
		{
			name:     "other reason does not apply",
			budgets:  []karpv1.Budget{nodes("10"), forReasons(nodes("2"), empty, drifted)},
			reason:   underutilized,
			numNodes: 30, wantValue: 10, want: 10,
		},
		{
			name:     "only budget for another reason",
			budgets:  []karpv1.Budget{forReasons(nodes("0"), drifted)},
			reason:   empty,
			numNodes: 30, wantValue: math.MaxInt32, want: math.MaxInt32,
		},
		{
			name:     "explicit empty reasons match no reason",
			budgets:  []karpv1.Budget{forReasons(nodes("0")), nodes("10")},
			reason:   empty,
			numNodes: 30, wantValue: 10, want: 10,
		},
		{
			name:     "active scheduled budget wins",
			budgets:  []karpv1.Budget{nodes("10"), scheduled("0", "0 9 * * *", 8*time.Hour)},
			now:      noon,
			numNodes: 30, wantValue: 0, want: 0,
		},
		{
			name:     "inactive scheduled budget ignored",
			budgets:  []karpv1.Budget{nodes("10"), scheduled("0", "0 9 * * *", 2*time.Hour)},
			now:      noon,
			numNodes: 30, wantValue: 10, want: 10,
		},
		{
			name:     "all budgets scheduled and inactive: unbounded",
			budgets:  []karpv1.Budget{scheduled("0", "0 9 * * *", 2*time.Hour), scheduled("1", "@hourly", 0)},
			now:      noon,
			numNodes: 30, disrupting: 1, wantValue: math.MaxInt32, want: math.MaxInt32 - 1,
		},
		{
			name:     "weekday window on a weekend",
			budgets:  []karpv1.Budget{nodes("10"), scheduled("0", "0 9 * * mon-fri", 8*time.Hour)},
			now:      time.Date(2025, time.June, 14, 12, 0, 0, 0, time.UTC), // Saturday
			numNodes: 30, wantValue: 10, want: 10,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reason := tt.reason
			if reason == "" {
				reason = underutilized
			}
			now := tt.now
			if now.IsZero() {
				now = noon
			}
			got, value, err := Allowed(nodePool(tt.budgets...), reason, tt.numNodes, tt.disrupting, now)
			if err != nil {
				t.Fatalf("Allowed: %v", err)
			}
			if got != tt.want || value != tt.wantValue {
				t.Errorf("Allowed = (%d, %d), want (%d, %d)", got, value, tt.want, tt.wantValue)
			}
		})
	}
}

func TestAllowedFailsClosed(t *testing.T) {
	tests := []struct {
		name    string
		budgets []karpv1.Budget
		wantErr []string
	}{
		{
			name:    "bad cron",
			budgets: []karpv1.Budget{nodes("10"), scheduled("0", "0 25 * * *", time.Hour)},
			wantErr: []string{`spec.disruption.budgets[1].schedule: "0 25 * * *" is not a valid cron expression (end of range (25) above maximum (23))`},
		},
		{
			name:    "bad cron in a budget for another reason",
			budgets: []karpv1.Budget{nodes("10"), forReasons(scheduled("0", "0 9 * *", time.Hour), drifted)},
			wantErr: []string{`spec.disruption.budgets[1].schedule: "0 9 * *" is not a valid cron expression (expected exactly 5 fields, found 4)`},
		},
		{
			name:    "@every",
			budgets: []karpv1.Budget{scheduled("0", "@every 1h", time.Hour)},
			wantErr: []string{`spec.disruption.budgets[0].schedule: "@every 1h" is not a valid cron expression (@every intervals`},
		},
		{
			name:    "bad nodes value",
			budgets: []karpv1.Budget{nodes("10"), nodes("ten")},
			wantErr: []string{`spec.disruption.budgets[1].nodes: "ten" is not a node count`},
		},
		{
			name:    "percent above 100",
			budgets: []karpv1.Budget{nodes("150%")},
			wantErr: []string{`spec.disruption.budgets[0].nodes: "150%" is not`},
		},
		{
			name:    "empty nodes value",
			budgets: []karpv1.Budget{nodes("")},
			wantErr: []string{`spec.disruption.budgets[0].nodes: "" is not`},
		},
		{
			name:    "bad nodes value in an inactive budget",
			budgets: []karpv1.Budget{nodes("10"), scheduled("-1", "0 9 * * *", time.Hour)},
			wantErr: []string{`spec.disruption.budgets[1].nodes: "-1" is not`},
		},
		{
			name:    "schedule without duration",
			budgets: []karpv1.Budget{nodes("10"), {Nodes: "0", Schedule: new("@daily")}},
			wantErr: []string{`spec.disruption.budgets[1].duration: required when schedule is set`},
		},
		{
			name:    "duration without schedule",
			budgets: []karpv1.Budget{{Nodes: "0", Duration: &metav1.Duration{Duration: time.Hour}}},
			wantErr: []string{`spec.disruption.budgets[0].schedule: required when duration is set`},
		},
		{
			name:    "negative duration",
			budgets: []karpv1.Budget{scheduled("0", "@daily", -time.Hour)},
			wantErr: []string{`spec.disruption.budgets[0].duration: -1h0m0s is negative`},
		},
		{
			name:    "several errors",
			budgets: []karpv1.Budget{nodes("x"), nodes("10"), scheduled("0", "a b c d e", time.Hour)},
			wantErr: []string{
				`spec.disruption.budgets[0].nodes: "x" is not`,
				`spec.disruption.budgets[2].schedule: "a b c d e" is not a valid cron expression (failed to parse int from a)`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, reason := range Reasons() {
				got, value, err := Allowed(nodePool(tt.budgets...), reason, 100, 0, noon)
				if got != 0 || value != 0 {
					t.Errorf("%s: Allowed = (%d, %d), want (0, 0)", reason, got, value)
				}
				if err == nil {
					t.Fatalf("%s: Allowed returned no error", reason)
				}
				for _, want := range tt.wantErr {
					if !strings.Contains(err.Error(), want) {
						t.Errorf("%s: error %q does not contain %q", reason, err, want)
					}
				}
			}
		})
	}
}

func TestAllowedNilNodePool(t *testing.T) {
	if got, value, err := Allowed(nil, empty, 10, 0, noon); got != 0 || value != 0 || err == nil {
		t.Errorf("Allowed(nil) = (%d, %d, %v), want (0, 0, error)", got, value, err)
	}
}

func TestActive(t *testing.T) {
	at := func(day, hour, minute int) time.Time {
		return time.Date(2025, time.June, day, hour, minute, 0, 0, time.UTC)
	}
	tests := []struct {
		name     string
		schedule string
		duration time.Duration
		now      time.Time
		want     bool
	}{
		{name: "before window", schedule: "0 9 * * *", duration: 8 * time.Hour, now: at(11, 8, 59), want: false},
		{name: "window start is included", schedule: "0 9 * * *", duration: 8 * time.Hour, now: at(11, 9, 0), want: true},
		{name: "inside window", schedule: "0 9 * * *", duration: 8 * time.Hour, now: at(11, 16, 59), want: true},
		{name: "window end is excluded", schedule: "0 9 * * *", duration: 8 * time.Hour, now: at(11, 17, 0), want: false},
		{name: "window end minus a second", schedule: "0 9 * * *", duration: 8 * time.Hour, now: at(11, 17, 0).Add(-time.Second), want: true},
		{name: "across midnight, same day", schedule: "0 22 * * *", duration: 4 * time.Hour, now: at(11, 23, 30), want: true},
		{name: "across midnight, next day", schedule: "0 22 * * *", duration: 4 * time.Hour, now: at(12, 1, 30), want: true},
		{name: "across midnight, after end", schedule: "0 22 * * *", duration: 4 * time.Hour, now: at(12, 2, 30), want: false},
		{name: "across midnight, before start", schedule: "0 22 * * *", duration: 4 * time.Hour, now: at(12, 21, 59), want: false},
		{name: "@daily at 00:30", schedule: "@daily", duration: time.Hour, now: at(11, 0, 30), want: true},
		{name: "@daily at 01:00", schedule: "@daily", duration: time.Hour, now: at(11, 1, 0), want: false},
		{name: "@daily at 23:59", schedule: "@daily", duration: time.Hour, now: at(11, 23, 59), want: false},
		{name: "@daily with surrounding spaces", schedule: " @daily ", duration: time.Hour, now: at(11, 0, 30), want: true},
		{name: "@hourly", schedule: "@hourly", duration: 10 * time.Minute, now: at(11, 7, 5), want: true},
		{name: "weekday range on Wednesday", schedule: "0 0 * * mon-fri", duration: 24 * time.Hour, now: at(11, 12, 0), want: true},
		{name: "weekday range on Sunday", schedule: "0 0 * * mon-fri", duration: 24 * time.Hour, now: at(15, 12, 0), want: false},
		{name: "duration longer than the period", schedule: "@hourly", duration: 2 * time.Hour, now: at(11, 7, 59), want: true},
		{name: "zero duration is never active", schedule: "* * * * *", duration: 0, now: at(11, 7, 0), want: false},
		// Karpenter quirk kept: a schedule that never fires makes cron return the zero time, which
		// is not after now, so the budget counts as active.
		{name: "schedule that never fires", schedule: "0 0 30 2 *", duration: time.Hour, now: at(11, 12, 0), want: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Active(scheduled("0", tt.schedule, tt.duration), tt.now)
			if err != nil {
				t.Fatalf("Active: %v", err)
			}
			if got != tt.want {
				t.Errorf("Active(%q for %s) at %s = %t, want %t", tt.schedule, tt.duration, tt.now, got, tt.want)
			}
		})
	}
}

func TestActiveNowInOtherZone(t *testing.T) {
	// 23:30 UTC expressed in UTC+2 is 01:30 the next day; the window is still evaluated in UTC.
	now := time.Date(2025, time.June, 12, 1, 30, 0, 0, time.FixedZone("UTC+2", 2*3600))
	got, err := Active(scheduled("0", "0 22 * * *", 4*time.Hour), now)
	if err != nil || !got {
		t.Errorf("Active = (%t, %v), want (true, nil)", got, err)
	}
	got, err = Active(scheduled("0", "0 0 * * *", 2*time.Hour), now)
	if err != nil || got {
		t.Errorf("Active(midnight window) = (%t, %v), want (false, nil)", got, err)
	}
}

func TestActiveUnscheduled(t *testing.T) {
	if got, err := Active(nodes("1"), noon); !got || err != nil {
		t.Errorf("Active(unscheduled) = (%t, %v), want (true, nil)", got, err)
	}
}

func TestReasons(t *testing.T) {
	want := []karpv1.DisruptionReason{underutilized, empty, drifted}
	got := Reasons()
	if !slices.Equal(got, want) {
		t.Fatalf("Reasons() = %v, want %v", got, want)
	}
	got[0] = "changed"
	if Reasons()[0] != underutilized {
		t.Error("Reasons() shares its slice between calls")
	}
}
