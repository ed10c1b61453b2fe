package disruption_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/api/meta"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/controllers/disruption"
	"github.com/joiner-dev/joiner/controllers/disruption/planner"
	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling"
	"github.com/joiner-dev/joiner/e2e/framework"
	"github.com/joiner-dev/joiner/providers/local"
)

// TestDryRunExplainsNodesLeftAlone reads the live cluster the way `joiner disruption plan` does
// and checks that the dry run and the controller's Events give the same reason for the nodes a
// budget of 0 keeps.
func TestDryRunExplainsNodesLeftAlone(t *testing.T) {
	const name = "dryrun"
	pool(t, name, func(np *karpv1.NodePool) { np.Spec.Disruption.Budgets = []karpv1.Budget{{Nodes: "0"}} })
	cluster.Deployment(t, name, name, 2, "3", nil)
	cluster.WaitRunning(t, name, 2, 2*time.Minute)
	cluster.Scale(t, name, 0)
	framework.Eventually(t, time.Minute, "both empty nodes to be Consolidatable", func(ctx context.Context) (bool, error) {
		claims := cluster.NodeClaims(t, name)
		for _, nc := range claims {
			if !meta.IsStatusConditionTrue(nc.Status.Conditions, karpv1.ConditionTypeConsolidatable) {
				return false, nil
			}
		}
		return len(claims) == 2, nil
	})
	const why = "No allowed disruptions for disruption reason Empty due to blocking budget"
	ctx := context.Background()
	cloud, err := local.New(ctx, cluster.Client, local.Options{})
	if err != nil {
		t.Fatal(err)
	}
	state, pdbs, err := disruption.ReadState(ctx, cluster.Client)
	if err != nil {
		t.Fatal(err)
	}
	cl, err := disruption.NewCluster(ctx, cloud, state, pdbs, scheduling.Options{}, time.Now(), logr.Discard())
	if err != nil {
		t.Fatal(err)
	}
	plans, err := planner.New(planner.Options{}, time.Now).DryRun(ctx, cl, 5)
	if err != nil {
		t.Fatal(err)
	}
	var text, js bytes.Buffer
	if err := disruption.WritePlans(&text, plans, disruption.OutputText); err != nil {
		t.Fatal(err)
	}
	if err := disruption.WritePlans(&js, plans, disruption.OutputJSON); err != nil {
		t.Fatal(err)
	}
	var report disruption.PlanReport
	if err := json.Unmarshal(js.Bytes(), &report); err != nil {
		t.Fatalf("the JSON plan does not decode: %v\n%s", err, js.String())
	}
	for _, nc := range cluster.NodeClaims(t, name) {
		found := false
		for _, v := range report.Nodes {
			if v.NodeClaim == nc.Name && v.Reason == planner.ReasonDisruptionBlocked && v.Message == why {
				found = true
			}
		}
		if !found {
			t.Errorf("the dry run does not say why NodeClaim %s is kept:\n%s", nc.Name, text.String())
		}
		if !strings.Contains(text.String(), nc.Status.NodeName) {
			t.Errorf("the text plan does not name node %s:\n%s", nc.Status.NodeName, text.String())
		}
		if !cluster.HasEvent(t, nc.Name, planner.ReasonDisruptionBlocked, why) {
			t.Errorf("no DisruptionBlocked event with the dry run's reason on NodeClaim %s", nc.Name)
		}
	}
	for _, p := range report.Passes {
		for _, n := range p.Nodes {
			for _, nc := range cluster.NodeClaims(t, name) {
				if n == nc.Status.NodeName {
					t.Errorf("the dry run would disrupt %s despite a budget of 0: %s", n, p.Command)
				}
			}
		}
	}
}
