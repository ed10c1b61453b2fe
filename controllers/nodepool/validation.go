package nodepool

import (
	"fmt"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/runtimevalidation"
)

// ReasonValidationFailed is the reason of ValidationSucceeded=False: the NodePool fails the runtime
// validation that the validating webhook enforces at admission (it was written while the webhook was
// down, or before Joiner was installed). Karpenter uses the same reason.
const ReasonValidationFailed = "NodePoolValidationFailed"

// maxValidationProblems is how many problems the ValidationSucceeded message lists; the rest are
// counted, which keeps the message far below the 32768 characters a condition message may hold.
const maxValidationProblems = 10

// validate sets ValidationSucceeded from the runtime validation of the NodePool's spec: the same
// checks, with the same messages, as the validating webhook. A NodePool that fails it is not Ready,
// so the provisioner leaves it alone until it is fixed.
func (c *Controller) validate(np *karpv1.NodePool) {
	now := c.clock.Now()
	problems := runtimevalidation.Messages(runtimevalidation.NodePool(np))
	if len(problems) == 0 {
		np.SetCondition(now, karpv1.ConditionTypeValidationSucceeded, metav1.ConditionTrue, ReasonValidationSucceeded, "")
		return
	}
	np.SetCondition(now, karpv1.ConditionTypeValidationSucceeded, metav1.ConditionFalse, ReasonValidationFailed, validationMessage(problems))
}

// validationMessage lists the problems one per line, at most maxValidationProblems of them.
func validationMessage(problems []string) string {
	if len(problems) <= maxValidationProblems {
		return strings.Join(problems, "\n")
	}
	return strings.Join(problems[:maxValidationProblems], "\n") +
		fmt.Sprintf("\n(and %d more problems; the validating webhook lists them all when the NodePool is applied again)", len(problems)-maxValidationProblems)
}
