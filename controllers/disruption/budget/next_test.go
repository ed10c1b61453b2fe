package budget

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

func TestNextChange(t *testing.T) {
	now := time.Date(2026, 3, 14, 10, 30, 0, 0, time.UTC)
	window := func(schedule string, d time.Duration) karpv1.Budget {
		return karpv1.Budget{Nodes: "0", Schedule: ptr.To(schedule), Duration: &metav1.Duration{Duration: d}}
	}
	cases := []struct {
		name    string
		budgets []karpv1.Budget
		want    time.Time // zero: none
	}{
		{name: "no budgets"},
		{name: "unscheduled budget", budgets: []karpv1.Budget{{Nodes: "10%"}}},
		{name: "window ahead opens", budgets: []karpv1.Budget{window("0 12 * * *", time.Hour)}, want: time.Date(2026, 3, 14, 12, 0, 0, 0, time.UTC)},
		{name: "open window closes", budgets: []karpv1.Budget{window("0 10 * * *", time.Hour)}, want: time.Date(2026, 3, 14, 11, 0, 0, 0, time.UTC)},
		{name: "window passed opens tomorrow", budgets: []karpv1.Budget{window("0 9 * * *", time.Hour)}, want: time.Date(2026, 3, 15, 9, 0, 0, 0, time.UTC)},
		{name: "earliest of several", budgets: []karpv1.Budget{window("0 12 * * *", time.Hour), window("45 10 * * *", 5*time.Minute)},
			want: time.Date(2026, 3, 14, 10, 45, 0, 0, time.UTC)},
		{name: "misconfigured schedule", budgets: []karpv1.Budget{window("not a schedule", time.Hour)}},
		{name: "schedule without duration", budgets: []karpv1.Budget{{Nodes: "0", Schedule: ptr.To("0 12 * * *")}}},
		{name: "schedule that never fires", budgets: []karpv1.Budget{window("0 0 30 2 *", time.Hour)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			np := &karpv1.NodePool{Spec: karpv1.NodePoolSpec{Disruption: karpv1.Disruption{Budgets: tc.budgets}}}
			got, ok := NextChange(np, now)
			if ok != !tc.want.IsZero() || !got.Equal(tc.want) {
				t.Errorf("NextChange = %s, %v; want %s", got, ok, tc.want)
			}
		})
	}
}
