package nodeclass

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
)

// CheckReady returns nil when the provider can launch from the class: Ready=True for its
// current generation, with subnets, security groups, AMIs and an instance profile in status.
// Otherwise it returns a *cloudprovider.NodeClassNotReadyError saying why.
func CheckReady(nc *awsv1.EC2NodeClass) error {
	ready := meta.FindStatusCondition(nc.Status.Conditions, awsv1.ConditionTypeReady)
	var why string
	switch {
	case ready == nil:
		why = "it has not been resolved yet"
	case ready.ObservedGeneration != nc.Generation:
		why = fmt.Sprintf("generation %d has not been resolved yet", nc.Generation)
	case ready.Status != metav1.ConditionTrue:
		why = fmt.Sprintf("Ready=%s (%s): %s", ready.Status, ready.Reason, ready.Message)
	case len(nc.Status.Subnets) == 0 || len(nc.Status.SecurityGroups) == 0 || len(nc.Status.AMIs) == 0 || nc.Status.InstanceProfile == "":
		why = "its status lacks subnets, security groups, AMIs or the instance profile"
	default:
		return nil
	}
	return cloudprovider.NewNodeClassNotReadyError(fmt.Errorf("EC2NodeClass %s: %s", nc.Name, why))
}
