package localtest_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/joiner-dev/joiner/providers/local"
	"github.com/joiner-dev/joiner/providers/local/localtest"
	"github.com/joiner-dev/joiner/testbed"
	nct "github.com/joiner-dev/joiner/testsupport/controllertest"
)

// readyOf returns the Node's Ready condition (zero without one).
func readyOf(node *corev1.Node) corev1.NodeCondition {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c
		}
	}
	return corev1.NodeCondition{}
}

// TestFailNode takes Nodes kwok made Ready and fails them: Ready has the status asked for, from
// now, and keeps it for 5 s (kwok, which makes a Node it manages Ready again within a second, no
// longer writes it). Bad input is an error naming the problem.
func TestFailNode(t *testing.T) {
	env := testbed.StartForTest(t, testbed.Options{Kwok: true})
	kube, err := client.New(env.Config, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, status := range []corev1.ConditionStatus{corev1.ConditionUnknown, corev1.ConditionFalse} {
		t.Run(string(status), func(t *testing.T) {
			name := "fail-" + strings.ToLower(string(status))
			res := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2"), corev1.ResourcePods: resource.MustParse("10")}
			node := &corev1.Node{
				ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{local.KwokNodeAnnotation: local.KwokNodeAnnotationValue}},
				Status:     corev1.NodeStatus{Capacity: res, Allocatable: res},
			}
			if err := kube.Create(ctx, node); err != nil {
				t.Fatal(err)
			}
			got := &corev1.Node{}
			get := func(ctx context.Context) error { return kube.Get(ctx, client.ObjectKey{Name: name}, got) }
			if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 30*time.Second, true, func(ctx context.Context) (bool, error) {
				return get(ctx) == nil && readyOf(got).Status == corev1.ConditionTrue, nil
			}); err != nil {
				t.Fatalf("kwok never made the node Ready (Ready=%q): %v", readyOf(got).Status, err)
			}
			now := time.Now().Truncate(time.Second)
			if err := localtest.FailNode(ctx, kube, name, status, now); err != nil {
				t.Fatal(err)
			}
			nct.Consistently(t, 5*time.Second, "the failed node stays failed and out of kwok's hands", func(ctx context.Context) error {
				if err := get(ctx); err != nil {
					return err
				}
				if c := readyOf(got); c.Status != status || !c.LastTransitionTime.Time.Equal(now) {
					return fmt.Errorf("Ready=%s since %s, want %s since %s", c.Status, c.LastTransitionTime, status, now)
				}
				if _, ok := got.Annotations[local.KwokNodeAnnotation]; ok {
					return fmt.Errorf("the failed node still carries kwok's annotation")
				}
				return nil
			})
		})
	}
	tests := []struct {
		name, node string
		status     corev1.ConditionStatus
		wantErr    string
	}{
		{name: "a healthy status", node: "any", status: corev1.ConditionTrue, wantErr: `fail node any: status "True": want "False" or "Unknown"`},
		{name: "no status", node: "any", wantErr: `status "": want`},
		{name: "no such node", node: "no-such-node", status: corev1.ConditionUnknown, wantErr: `fail node no-such-node: nodes "no-such-node" not found`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := localtest.FailNode(ctx, kube, tt.node, tt.status, time.Now())
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("FailNode: %v, want an error containing %s", err, fmt.Sprintf("%q", tt.wantErr))
			}
		})
	}
}
