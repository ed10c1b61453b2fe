package termination_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
	"github.com/joiner-dev/joiner/controllers/termination"
	"github.com/joiner-dev/joiner/controllers/termination/terminationtest"
	nct "github.com/joiner-dev/joiner/testsupport/controllertest"
)

// terminated returns nil once the NodeClaim, its Node and its instance are gone.
func terminated(ctx context.Context, cloud *fake.CloudProvider, nc *karpv1.NodeClaim, node *corev1.Node) error {
	err := errors.Join(env.Gone(ctx, nc), env.Gone(ctx, node))
	if ierr := instanceExists(ctx, cloud, node.Spec.ProviderID); !cloudprovider.IsNodeClaimNotFound(ierr) {
		err = errors.Join(err, fmt.Errorf("instance %s still exists (%v)", node.Spec.ProviderID, ierr))
	}
	return err
}

func TestVolumeAttachmentsHoldTermination(t *testing.T) {
	cases := []struct {
		name string
		// tolerant makes the pod tolerate the disrupted taint: it stays, and so does its volume.
		tolerant bool
		// grace is the NodeClaim's terminationGracePeriod (none when zero).
		grace time.Duration
		// hold: termination waits until the test deletes the VolumeAttachment.
		hold       bool
		wantStatus metav1.ConditionStatus
		wantReason string
	}{
		{name: "a drained pod's attachment holds termination until it is deleted", hold: true,
			wantStatus: metav1.ConditionTrue, wantReason: termination.ReasonVolumesDetached},
		{name: "past the terminationGracePeriod the attachment no longer holds", grace: 4 * time.Second,
			wantStatus: metav1.ConditionFalse, wantReason: termination.ReasonTerminationGracePeriodElapsed},
		{name: "the attachment of a pod that stays is not waited on", tolerant: true,
			wantStatus: metav1.ConditionTrue, wantReason: termination.ReasonVolumesDetached},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			cloud := fake.New()
			startControllers(t, cloud)
			nc := nct.NodeClaim(nct.Name("nc"), "pool-a")
			if tc.grace > 0 {
				nc.Spec.TerminationGracePeriod = &metav1.Duration{Duration: tc.grace}
			}
			node := readyNodeClaim(t, nc)
			ns := env.Namespace(t)
			pv, pvc := terminationtest.Volume(ns, "data")
			pod := nct.Pod(ns, "db", node.Name, nil)
			pod.Spec.Volumes = append(pod.Spec.Volumes, terminationtest.ClaimVolume(pvc.Name))
			if tc.tolerant {
				pod.Spec.Tolerations = append(pod.Spec.Tolerations, corev1.Toleration{Key: karpv1.DisruptedTaintKey, Operator: corev1.TolerationOpExists})
			}
			va := terminationtest.Attachment(pv.Name, node.Name)
			terminationtest.Create(t, env.Client, pv, pvc, pod, va)
			nct.Eventually(t, 30*time.Second, "pod running", func(ctx context.Context) error {
				if err := env.Get(ctx, pod); err != nil {
					return err
				}
				if pod.Status.Phase != corev1.PodRunning {
					return fmt.Errorf("pod is %s", pod.Status.Phase)
				}
				return nil
			})
			rec := terminationtest.RecordForTest(t, env.Testbed.Config, env.Scheme, &karpv1.NodeClaimList{})
			start := time.Now()
			if err := env.Client.Delete(t.Context(), nc); err != nil {
				t.Fatal(err)
			}
			if tc.hold {
				assertHeld(t, cloud, nc, node, va)
			}
			nct.Eventually(t, 30*time.Second, "nodeclaim, node and instance gone", func(ctx context.Context) error {
				return terminated(ctx, cloud, nc, node)
			})
			if !tc.hold {
				if err := env.Get(t.Context(), va); err != nil {
					t.Errorf("the VolumeAttachment should still be there: %v", err)
				}
			}
			if tc.grace > 0 {
				if took := time.Since(start); took < tc.grace-time.Second {
					t.Errorf("terminated after %s, before the terminationGracePeriod of %s ended", took, tc.grace)
				}
				if !rec.SawCondition(nc.Name, karpv1.ConditionTypeVolumesDetached, metav1.ConditionUnknown, termination.ReasonAwaitingVolumeDetachment) {
					t.Error("termination never waited for the volume before the deadline")
				}
			}
			if !rec.SawCondition(nc.Name, karpv1.ConditionTypeVolumesDetached, tc.wantStatus, tc.wantReason) {
				t.Errorf("the NodeClaim never had VolumesDetached %s/%s", tc.wantStatus, tc.wantReason)
			}
		})
	}
}

// assertHeld checks that termination drains the node, then waits on the VolumeAttachment (with
// the condition and the Node event saying so) without terminating anything, and then deletes it.
func assertHeld(t *testing.T, cloud *fake.CloudProvider, nc *karpv1.NodeClaim, node *corev1.Node, va client.Object) {
	t.Helper()
	nct.Eventually(t, 20*time.Second, "drained, awaiting volume detachment", func(ctx context.Context) error {
		if err := env.Get(ctx, nc); err != nil {
			return err
		}
		return errors.Join(
			nct.Condition(nc, karpv1.ConditionTypeDrained, metav1.ConditionTrue, termination.ReasonDrained),
			nct.Condition(nc, karpv1.ConditionTypeVolumesDetached, metav1.ConditionUnknown, termination.ReasonAwaitingVolumeDetachment),
			env.HasEvent(ctx, node.Name, termination.ReasonAwaitingVolumeDetachment, va.GetName()))
	})
	nct.Consistently(t, 2*time.Second, "nothing terminated while the volume is attached", func(ctx context.Context) error {
		return errors.Join(env.Get(ctx, nc), env.Get(ctx, node), env.Get(ctx, va), instanceExists(ctx, cloud, node.Spec.ProviderID))
	})
	if err := env.Client.Delete(t.Context(), va); err != nil {
		t.Fatal(err)
	}
}
