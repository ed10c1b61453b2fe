package aws

import (
	"context"
	"strings"
	"testing"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/providers/aws/awstest"
	"github.com/joiner-dev/joiner/providers/aws/nodeclass"
)

// TestMotoNodeClassControllerThenLaunch resolves an EC2NodeClass with the nodeclass controller
// (al2023@latest alias through the published SSM parameters, subnets and security groups by
// tag) and launches from the status it wrote; the launched NodeClaim carries the class's hash.
func TestMotoNodeClassControllerThenLaunch(t *testing.T) {
	f := newMotoFixture(t, Options{})
	ctx := context.Background()
	clients := nodeclass.NewClients(f.faults.Apply(f.moto.Config), nodeclass.RetryOptions{})
	ncc, err := nodeclass.NewController(f.kube, clients.EC2, clients.IAM, clients.SSM, nil, events.NewFakeRecorder(100), nodeclass.Options{
		ClusterName: f.env.ClusterName, Region: awstest.Region,
		KubernetesVersion: func(context.Context) (string, error) {
			return awstest.PublishedKubernetesVersions[len(awstest.PublishedKubernetesVersions)-1], nil
		},
		DisableCapacityReservations: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	class := &awsv1.EC2NodeClass{}
	class.Name = "resolved"
	class.Spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{Alias: "al2023@latest"}}
	class.Spec.SubnetSelectorTerms = []awsv1.SubnetSelectorTerm{{Tags: map[string]string{awstest.DiscoveryTag: f.env.ClusterName}}}
	class.Spec.SecurityGroupSelectorTerms = []awsv1.SecurityGroupSelectorTerm{{Tags: map[string]string{awstest.DiscoveryTag: f.env.ClusterName}}}
	class.Spec.InstanceProfile = awssdk.String(f.env.InstanceProfileName)
	if err := f.kube.Create(ctx, class); err != nil {
		t.Fatal(err)
	}
	claim := nodeClaim("1", m5Family)
	claim.Spec.NodeClassRef.Name = "resolved"
	if _, err := f.p.Create(ctx, claim); !cloudprovider.IsNodeClassNotReady(err) {
		t.Fatalf("Create before the class is resolved = %v, want NodeClassNotReadyError", err)
	}
	for i := 0; i < 5; i++ {
		if _, err := ncc.Reconcile(ctx, ctrl.Request{NamespacedName: clientKey("resolved")}); err != nil {
			t.Fatalf("reconcile %d: %v", i, err)
		}
		if err := f.kube.Get(ctx, clientKey("resolved"), class); err != nil {
			t.Fatal(err)
		}
		if nodeclass.CheckReady(class) == nil {
			break
		}
	}
	if err := nodeclass.CheckReady(class); err != nil {
		t.Fatalf("class not ready after reconciling: %v\n%+v", err, class.Status)
	}
	launched, err := f.p.Create(ctx, claim)
	if err != nil {
		t.Fatal(err)
	}
	// m5 has no GPU: the standard amd64 AMI, not the nvidia one, serves it.
	wantAMI := ""
	for _, a := range class.Status.AMIs {
		if strings.Contains(a.Name, "x86_64-standard") {
			wantAMI = a.ID
		}
	}
	if launched.Status.ImageID == "" || launched.Status.ImageID != wantAMI {
		t.Errorf("launched image %q, want the class's amd64 AMI %q (status %+v)", launched.Status.ImageID, wantAMI, class.Status.AMIs)
	}
	if launched.Annotations[awsv1.AnnotationEC2NodeClassHash] != class.Annotations[awsv1.AnnotationEC2NodeClassHash] || launched.Annotations[awsv1.AnnotationEC2NodeClassHash] == "" {
		t.Errorf("launched hash %q, class hash %q", launched.Annotations[awsv1.AnnotationEC2NodeClassHash], class.Annotations[awsv1.AnnotationEC2NodeClassHash])
	}
	if reason, err := f.p.IsDrifted(ctx, launched); err != nil || reason == DriftReasonNodeClass || reason == DriftReasonAMI {
		t.Errorf("IsDrifted right after launch = %q, %v", reason, err)
	}
}
