package nodeclass

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"k8s.io/apimachinery/pkg/types"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/testsupport/controllertest"
)

// profileRoles returns the roles of an instance profile, or an error naming NoSuchEntity.
func profileRoles(ctx context.Context, name string) ([]string, map[string]string, error) {
	out, err := iam.NewFromConfig(moto.Config).GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if err != nil {
		return nil, nil, err
	}
	var roles []string
	for _, r := range out.InstanceProfile.Roles {
		roles = append(roles, aws.ToString(r.RoleName))
	}
	tags := map[string]string{}
	for _, t := range out.InstanceProfile.Tags {
		tags[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	return roles, tags, nil
}

func getClass(ctx context.Context, name string) (*awsv1.EC2NodeClass, error) {
	nc := &awsv1.EC2NodeClass{}
	return nc, env.Client.Get(ctx, types.NamespacedName{Name: name}, nc)
}

// TestInstanceProfileFollowsRoleAndClass: a class with spec.role gets an instance profile that
// holds the role and carries its tags; changing the role or the tags updates the profile (and
// the tags the drift hash); deleting the class deletes the profile.
func TestInstanceProfileFollowsRoleAndClass(t *testing.T) {
	f := start(t, Options{})
	ctx := context.Background()
	nc := createClass(t, baseSpec(f.aws))
	nc = waitConditions(t, nc.Name, allReady())
	profile := nc.Status.InstanceProfile
	firstHash := nc.Annotations[awsv1.AnnotationEC2NodeClassHash]
	if roles, _, err := profileRoles(ctx, profile); err != nil || len(roles) != 1 || roles[0] != f.aws.RoleName {
		t.Fatalf("profile %s roles %v, %v; want [%s]", profile, roles, err, f.aws.RoleName)
	}

	// Another role, given as an ARN, and a tag.
	other := f.aws.ClusterName + "-other"
	role, err := iam.NewFromConfig(moto.Config).CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(other),
		AssumeRolePolicyDocument: aws.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)})
	if err != nil {
		t.Fatal(err)
	}
	nc.Spec.Role = aws.ToString(role.Role.Arn)
	nc.Spec.Tags = map[string]string{"team": "payments"}
	if err := env.Client.Update(ctx, nc); err != nil {
		t.Fatalf("update class: %v", err)
	}
	waitConditions(t, nc.Name, allReady())
	controllertest.Eventually(t, 10*time.Second, "the profile holds the new role and the tag", func(ctx context.Context) error {
		roles, tags, err := profileRoles(ctx, profile)
		if err != nil {
			return err
		}
		if len(roles) != 1 || roles[0] != other || tags["team"] != "payments" {
			return fmt.Errorf("roles %v, tags %v", roles, tags)
		}
		return nil
	})
	nc, err = getClass(ctx, nc.Name)
	if err != nil {
		t.Fatal(err)
	}
	if h := nc.Annotations[awsv1.AnnotationEC2NodeClassHash]; h == firstHash || h != Hash(nc) {
		t.Errorf("hash annotation %s after role and tags changed (was %s, want %s)", h, firstHash, Hash(nc))
	}
	if nc.Status.InstanceProfile != profile {
		t.Errorf("status.instanceProfile %s, want the same profile %s", nc.Status.InstanceProfile, profile)
	}

	if err := env.Client.Delete(ctx, nc); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, 20*time.Second, "the class is gone", func(ctx context.Context) error { return env.Gone(ctx, nc) })
	if _, _, err := profileRoles(ctx, profile); errorCode(err) != "NoSuchEntity" {
		t.Errorf("profile %s after the class was deleted: %v, want NoSuchEntity", profile, err)
	}
	controllertest.Eventually(t, 10*time.Second, "event", func(ctx context.Context) error {
		return env.HasEvent(ctx, nc.Name, ReasonInstanceProfileDeleted, profile)
	})
	// A profile the class was given is never deleted.
	if _, _, err := profileRoles(ctx, f.aws.InstanceProfileName); err != nil {
		t.Errorf("seeded profile %s: %v", f.aws.InstanceProfileName, err)
	}
}

// TestDeletionWaitsForNodeClaims: deleting a class that NodeClaims still use waits for them, says
// so in an Event, keeps the instance profile, and completes once they are gone.
func TestDeletionWaitsForNodeClaims(t *testing.T) {
	f := start(t, Options{NodeClaimWaitPeriod: time.Hour}) // only the NodeClaims' deletion may wake the class
	ctx := context.Background()
	nc := waitConditions(t, createClass(t, baseSpec(f.aws)).Name, allReady())
	profile := nc.Status.InstanceProfile

	var claims []*karpv1.NodeClaim
	for i := range 2 {
		claim := controllertest.NodeClaim(controllertest.Name(fmt.Sprintf("uses-class-%d", i)), "default")
		claim.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: nc.Name}
		if err := env.Client.Create(ctx, claim); err != nil {
			t.Fatalf("create NodeClaim: %v", err)
		}
		claims = append(claims, claim)
	}
	other := controllertest.NodeClaim(controllertest.Name("other-class"), "default")
	other.Spec.NodeClassRef = &karpv1.NodeClassReference{Group: awsv1.Group, Kind: "EC2NodeClass", Name: nc.Name + "-other"}
	if err := env.Client.Create(ctx, other); err != nil {
		t.Fatalf("create NodeClaim: %v", err)
	}

	if err := env.Client.Delete(ctx, nc); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, 10*time.Second, "waiting event", func(ctx context.Context) error {
		return env.HasEvent(ctx, nc.Name, ReasonWaitingOnNodeClaimTermination,
			fmt.Sprintf("Waiting on 2 NodeClaims to terminate before deleting the EC2NodeClass: %s, %s", claims[0].Name, claims[1].Name))
	})
	controllertest.Consistently(t, time.Second, "the class waits", func(ctx context.Context) error {
		got, err := getClass(ctx, nc.Name)
		if err != nil {
			return err
		}
		if got.DeletionTimestamp.IsZero() {
			return errors.New("not being deleted")
		}
		_, _, err = profileRoles(ctx, profile)
		return err
	})

	if err := env.Client.Delete(ctx, claims[0]); err != nil {
		t.Fatal(err)
	}
	// The event names the first NodeClaim waited for as related, so a new one follows.
	controllertest.Eventually(t, 10*time.Second, "event for the last NodeClaim", func(ctx context.Context) error {
		return env.HasEvent(ctx, nc.Name, ReasonWaitingOnNodeClaimTermination, "Waiting on 1 NodeClaims to terminate before deleting the EC2NodeClass: "+claims[1].Name)
	})
	if err := env.Client.Delete(ctx, claims[1]); err != nil {
		t.Fatal(err)
	}
	controllertest.Eventually(t, 10*time.Second, "the class is gone once its NodeClaims are", func(ctx context.Context) error {
		return env.Gone(ctx, nc)
	})
	if _, _, err := profileRoles(ctx, profile); errorCode(err) != "NoSuchEntity" {
		t.Errorf("profile %s after the class was deleted: %v, want NoSuchEntity", profile, err)
	}
	if err := env.Get(ctx, other); err != nil {
		t.Errorf("the NodeClaim of another class: %v", err)
	}
}

// TestAWSErrorsAreRetried: throttling and server errors are retried by the SDK (within a
// reconcile) and by the controller (with backoff, across reconciles) until the class is Ready.
func TestAWSErrorsAreRetried(t *testing.T) {
	for _, tc := range []struct {
		name   string
		op     string
		n      int
		status int
		code   string
	}{
		{name: "throttled subnets, retried by the SDK", op: "ec2:DescribeSubnets", n: 2, status: 503},
		{name: "throttled SSM, retried by the SDK", op: "ssm:GetParameter", n: 2, status: 400},
		{name: "throttled IAM, retried by the SDK", op: "iam:GetInstanceProfile", n: 2, status: 400},
		{name: "server errors beyond the SDK's attempts, retried by the controller", op: "ec2:DescribeSecurityGroups", n: 7, status: 500, code: "InternalError"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := start(t, Options{}) // empty caches
			before := moto.Calls(tc.op)
			moto.FailNext(tc.op, tc.n, tc.status, tc.code)
			spec := baseSpec(f.aws)
			if tc.op == "ssm:GetParameter" {
				spec.AMIFamily = aws.String(awsv1.AMIFamilyAL2023)
				spec.AMISelectorTerms = []awsv1.AMISelectorTerm{{SSMParameter: f.aws.CustomAMIParameter}}
			}
			nc := createClass(t, spec)
			waitConditions(t, nc.Name, allReady())
			if got := moto.Calls(tc.op) - before; got < tc.n+1 {
				t.Errorf("%s: %d calls, want at least %d (%d failures and a success)", tc.op, got, tc.n+1, tc.n)
			}
		})
	}
}
