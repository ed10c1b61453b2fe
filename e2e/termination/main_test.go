// Package termination_test checks termination on a full local cluster (Joiner with the local
// provider): the drain evicts in Karpenter's order (ordinary pods, DaemonSet pods, critical pods,
// critical DaemonSet pods), a StatefulSet pod's VolumeAttachment holds the instance until it is
// deleted, and what that wait gains: the time until the StatefulSet pod can run elsewhere, with
// the wait and without it. No CSI driver runs here, and kube-controller-manager's attach-detach
// controller leaves kwok's Nodes alone (they do not carry the controller-managed-attach-detach
// annotation), so the tests create and delete the VolumeAttachments themselves.
package termination_test

import (
	"os"
	"testing"
	"time"

	"github.com/joiner-dev/joiner/controllers"
	"github.com/joiner-dev/joiner/controllers/termination"
	"github.com/joiner-dev/joiner/e2e/framework"
	"github.com/joiner-dev/joiner/operator"
)

var cluster *framework.Cluster

func TestMain(m *testing.M) {
	os.Exit(framework.MainLocal(m, &cluster, operator.Options{
		Controllers: controllers.Options{
			Provisioning: framework.QuickProvisioning(),
			// One drain pass a second (the default is 5 s) keeps the four drain groups quick; the
			// volume wait polls at its default, 1 s.
			Termination: termination.Options{PollInterval: time.Second},
		},
	}))
}
