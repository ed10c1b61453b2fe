// Package cloudformation_test checks joiner.yaml: statically (the controller policy grants exactly
// what the source calls, policy_test.go; what moto cannot create, template_test.go) and by creating
// its stack in moto's CloudFormation and using what it created (this file and
// interruption_test.go).
package cloudformation_test

import (
	"context"
	"encoding/json"
	"maps"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/eventbridge"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	sqstypes "github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/joiner-dev/joiner/config/cloudformation"
	"github.com/joiner-dev/joiner/providers/aws/awstest"
)

// oidcProvider is the IAM OIDC provider of an EKS cluster, as `aws eks describe-cluster` and
// `eksctl utils associate-iam-oidc-provider` give it.
const oidcProvider = "arn:aws:iam::" + awstest.AccountID + ":oidc-provider/oidc.eks.us-east-1.amazonaws.com/id/EXAMPLED539D4633E53DE1B71EXAMPLE"

// motoSkips are the resource types of joiner.yaml that moto's CloudFormation does not implement:
// it completes the stack without them. template_test.go checks them instead.
var motoSkips = []string{"AWS::EKS::AccessEntry", "AWS::EKS::PodIdentityAssociation", "AWS::SQS::QueuePolicy"}

// installation is one stack of joiner.yaml, for one cluster.
type installation struct {
	cluster string
	irsa    bool
	stack   cloudformation.Stack
}

// TestStackInMoto creates the stack of joiner.yaml twice in moto, as a user would with `aws
// cloudformation deploy` (one cluster trusting the controller through IRSA, one through Pod
// Identity), waits for CREATE_COMPLETE, and checks what each created: the roles and their trust,
// the controller policy with every placeholder resolved, the node role in its instance profile,
// the queue and the five EventBridge rules that target it. Then it sends EC2 and AWS Health
// events through EventBridge and checks that the AWS provider's interruption controller, given
// only the queue name the stack outputs, receives and acts on exactly the ones it handles.
func TestStackInMoto(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: creates two stacks in moto; make test runs it")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	m := awstest.Start(t)
	cf := cloudformation.NewClient(m.Config)
	start := time.Now()
	installs := []*installation{{cluster: "prod", irsa: true}, {cluster: "dev"}}
	for _, in := range installs {
		params := map[string]string{"ClusterName": in.cluster}
		if in.irsa {
			params["OIDCProviderArn"] = oidcProvider
		}
		name := "joiner-" + in.cluster
		if _, err := cf.Create(ctx, name, params); err != nil {
			t.Fatal(err)
		}
		st, err := cf.WaitCreated(ctx, name, 100*time.Millisecond)
		if err != nil {
			t.Fatal(err)
		}
		in.stack = st
	}
	t.Logf("created %d stacks in %v", len(installs), time.Since(start).Round(time.Millisecond))
	iamc := iam.NewFromConfig(m.Config)
	eb := eventbridge.NewFromConfig(m.Config)

	t.Run("resources and outputs", func(t *testing.T) {
		for _, in := range installs {
			checkResources(t, in)
		}
	})
	t.Run("controller role trust", func(t *testing.T) {
		for _, in := range installs {
			checkControllerTrust(ctx, t, iamc, in)
		}
	})
	t.Run("controller policy", func(t *testing.T) {
		for _, in := range installs {
			checkControllerPolicy(ctx, t, iamc, in)
		}
	})
	t.Run("node role and instance profile", func(t *testing.T) {
		for _, in := range installs {
			checkNodeRole(ctx, t, iamc, in)
		}
	})
	t.Run("interruption queue", func(t *testing.T) {
		for _, in := range installs {
			checkQueue(ctx, t, sqs.NewFromConfig(m.Config), in)
		}
	})
	t.Run("event rules", func(t *testing.T) {
		for _, in := range installs {
			checkRules(ctx, t, eb, in)
		}
	})
	t.Run("interruption events reach the controller", func(t *testing.T) {
		checkInterruption(ctx, t, m, eb, installs[0].stack.Outputs["InterruptionQueueName"])
	})
	t.Run("waiting fails", func(t *testing.T) {
		checkWaitErrors(ctx, t, cf, "joiner-"+installs[0].cluster)
	})
}

// checkWaitErrors: WaitCreated ends with an error naming the stack and the cause when the stack
// does not exist, when its poll interval is not positive and when ctx runs out.
func checkWaitErrors(ctx context.Context, t *testing.T, cf *cloudformation.Client, created string) {
	t.Helper()
	expired, cancel := context.WithDeadline(ctx, time.Now())
	defer cancel()
	for _, tc := range []struct {
		name, stack string
		ctx         context.Context
		interval    time.Duration
		want        []string
	}{
		{name: "missing stack", stack: "joiner-absent", ctx: ctx, interval: 10 * time.Millisecond, want: []string{"joiner-absent", "does not exist"}},
		{name: "no interval", stack: created, ctx: ctx, want: []string{created, "poll interval"}},
		{name: "ctx ran out", stack: created, ctx: expired, interval: 10 * time.Millisecond, want: []string{created, "wait"}},
	} {
		_, err := cf.WaitCreated(tc.ctx, tc.stack, tc.interval)
		for _, want := range tc.want {
			if err == nil || !strings.Contains(err.Error(), want) {
				t.Errorf("%s: WaitCreated error %v, want one that says %q", tc.name, err, want)
			}
		}
	}
}

// checkResources: every resource of the template that moto implements is CREATE_COMPLETE, and
// every output is set to the resource the docs say.
func checkResources(t *testing.T, in *installation) {
	t.Helper()
	created := map[string]cloudformation.Resource{}
	for _, r := range in.stack.Resources {
		created[r.LogicalID] = r
	}
	res := at(t, template(t), "Resources").(map[string]any)
	for _, id := range slices.Sorted(maps.Keys(res)) {
		typ := at(t, res, id, "Type").(string)
		r, ok := created[id]
		switch {
		case slices.Contains(motoSkips, typ):
			if ok {
				t.Errorf("%s: moto created %s (%s): it implements %s now, drop it from motoSkips", in.cluster, id, r.Status, typ)
			}
		case !ok || r.Status != "CREATE_COMPLETE" || r.PhysicalID == "":
			t.Errorf("%s: resource %s (%s) is %+v, want CREATE_COMPLETE with a physical ID", in.cluster, id, typ, r)
		}
	}
	account := "arn:aws:iam::" + awstest.AccountID + ":"
	want := map[string]string{
		"ControllerRoleArn":       account + "role/JoinerController-" + in.cluster,
		"NodeRoleName":            "KarpenterNodeRole-" + in.cluster,
		"NodeRoleArn":             account + "role/KarpenterNodeRole-" + in.cluster,
		"NodeInstanceProfileName": "KarpenterNodeInstanceProfile-" + in.cluster,
		"InterruptionQueueName":   in.cluster,
		"InterruptionQueueArn":    "arn:aws:sqs:" + awstest.Region + ":" + awstest.AccountID + ":" + in.cluster,
	}
	if got := in.stack.Outputs; !maps.Equal(got, want) {
		t.Errorf("%s: outputs %v, want %v", in.cluster, got, want)
	}
	if keys := slices.Sorted(maps.Keys(at(t, template(t), "Outputs").(map[string]any))); !slices.Equal(keys, slices.Sorted(maps.Keys(want))) {
		t.Errorf("the template's outputs %v are not the ones checked here %v", keys, slices.Sorted(maps.Keys(want)))
	}
}

// decodeDocument reads a policy document as IAM returns it (URL-encoded JSON).
func decodeDocument(t *testing.T, what, encoded string) map[string]any {
	t.Helper()
	text, err := url.QueryUnescape(encoded)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	var doc map[string]any
	if err := json.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatalf("%s is not JSON: %v\n%s", what, err, text)
	}
	return doc
}

// roleName is the name in a role ARN.
func roleName(arn string) string { return arn[strings.LastIndex(arn, "/")+1:] }

// checkControllerTrust: with IRSA only the chart's ServiceAccount, through the cluster's OIDC
// provider, may assume the role; without it, EKS Pod Identity may.
func checkControllerTrust(ctx context.Context, t *testing.T, iamc *iam.Client, in *installation) {
	t.Helper()
	out, err := iamc.GetRole(ctx, &iam.GetRoleInput{RoleName: awssdk.String(roleName(in.stack.Outputs["ControllerRoleArn"]))})
	if err != nil {
		t.Fatalf("%s: %v", in.cluster, err)
	}
	trust := statements(t, decodeDocument(t, "trust policy", awssdk.ToString(out.Role.AssumeRolePolicyDocument)))
	if len(trust) != 1 {
		t.Fatalf("%s: the controller role's trust has %d statements, want 1: %+v", in.cluster, len(trust), trust)
	}
	s := trust[0]
	if in.irsa {
		issuer := strings.TrimPrefix(oidcProvider, "arn:aws:iam::"+awstest.AccountID+":oidc-provider/")
		cond, _ := at(t, s.raw, "Condition", "StringEquals").(map[string]any)
		if at(t, s.raw, "Principal", "Federated") != oidcProvider || !slices.Equal(s.Actions, []string{"sts:AssumeRoleWithWebIdentity"}) ||
			cond[issuer+":sub"] != "system:serviceaccount:joiner-system:joiner" || cond[issuer+":aud"] != "sts.amazonaws.com" {
			t.Errorf("%s: IRSA trust %v: want %s to let system:serviceaccount:joiner-system:joiner assume the role", in.cluster, s.raw, oidcProvider)
		}
		return
	}
	if at(t, s.raw, "Principal", "Service") != "pods.eks.amazonaws.com" || !slices.Equal(s.Actions, []string{"sts:AssumeRole", "sts:TagSession"}) {
		t.Errorf("%s: Pod Identity trust %v: want pods.eks.amazonaws.com with sts:AssumeRole and sts:TagSession", in.cluster, s.raw)
	}
}

// checkControllerPolicy: the controller role holds the template's policy and no other, statement
// by statement, with every reference resolved: each condition on the cluster's tags names this
// cluster, and the cluster, queue and node role statements apply to this stack's.
func checkControllerPolicy(ctx context.Context, t *testing.T, iamc *iam.Client, in *installation) {
	t.Helper()
	role := awssdk.String(roleName(in.stack.Outputs["ControllerRoleArn"]))
	name := "JoinerControllerPolicy-" + in.cluster
	inline, err := iamc.ListRolePolicies(ctx, &iam.ListRolePoliciesInput{RoleName: role})
	if err != nil {
		t.Fatal(err)
	}
	attached, err := iamc.ListAttachedRolePolicies(ctx, &iam.ListAttachedRolePoliciesInput{RoleName: role})
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(inline.PolicyNames, []string{name}) || len(attached.AttachedPolicies) != 0 {
		t.Errorf("%s: the controller role has policies %v and %+v attached, want only %s", in.cluster, inline.PolicyNames, attached.AttachedPolicies, name)
	}
	out, err := iamc.GetRolePolicy(ctx, &iam.GetRolePolicyInput{RoleName: role, PolicyName: awssdk.String(name)})
	if err != nil {
		t.Fatal(err)
	}
	encoded := awssdk.ToString(out.PolicyDocument)
	if text, _ := url.QueryUnescape(encoded); strings.Contains(text, "${") || strings.Contains(text, "<") {
		t.Errorf("%s: the controller policy holds an unresolved reference:\n%s", in.cluster, text)
	}
	got := statements(t, decodeDocument(t, "controller policy", encoded))
	want := statements(t, controllerPolicy(t))
	if len(got) != len(want) {
		t.Fatalf("%s: the controller policy has %d statements, the template %d", in.cluster, len(got), len(want))
	}
	clusterKeys := 0
	for i := range want {
		if got[i].Sid != want[i].Sid || !slices.Equal(got[i].Actions, want[i].Actions) {
			t.Errorf("%s: statement %d is %s %v, the template's %s %v", in.cluster, i, got[i].Sid, got[i].Actions, want[i].Sid, want[i].Actions)
		}
		for op, keys := range conditionsOf(got[i].raw) {
			for key, v := range keys {
				other := strings.Contains(key, "kubernetes.io/cluster/") && !strings.HasSuffix(key, "kubernetes.io/cluster/"+in.cluster) ||
					strings.HasSuffix(key, "/eks:eks-cluster-name") && v != in.cluster
				if other {
					t.Errorf("%s: statement %s: %s %s = %v names another cluster", in.cluster, got[i].Sid, op, key, v)
				}
				if strings.HasSuffix(key, "kubernetes.io/cluster/"+in.cluster) {
					clusterKeys++
				}
			}
		}
	}
	if clusterKeys == 0 {
		t.Errorf("%s: no condition of the controller policy checks the kubernetes.io/cluster/%s tag", in.cluster, in.cluster)
	}
	resources := map[string][]string{}
	for _, s := range got {
		resources[s.Sid] = s.Resources
	}
	for sid, want := range map[string]string{
		"DescribeOwnCluster":    "arn:aws:eks:" + awstest.Region + ":" + awstest.AccountID + ":cluster/" + in.cluster,
		"ReadInterruptionQueue": in.stack.Outputs["InterruptionQueueArn"],
		"PassNodeRole":          in.stack.Outputs["NodeRoleArn"],
	} {
		if !slices.Equal(resources[sid], []string{want}) {
			t.Errorf("%s: statement %s applies to %v, want only %s", in.cluster, sid, resources[sid], want)
		}
	}
}

// checkNodeRole: EC2 may assume the node role, and the stack's instance profile holds it.
func checkNodeRole(ctx context.Context, t *testing.T, iamc *iam.Client, in *installation) {
	t.Helper()
	role, err := iamc.GetRole(ctx, &iam.GetRoleInput{RoleName: awssdk.String(in.stack.Outputs["NodeRoleName"])})
	if err != nil {
		t.Fatal(err)
	}
	trust := statements(t, decodeDocument(t, "node role trust", awssdk.ToString(role.Role.AssumeRolePolicyDocument)))
	if len(trust) != 1 || at(t, trust[0].raw, "Principal", "Service") != "ec2.amazonaws.com" || !slices.Equal(trust[0].Actions, []string{"sts:AssumeRole"}) {
		t.Errorf("%s: node role trust %+v, want ec2.amazonaws.com to assume it", in.cluster, trust)
	}
	profile, err := iamc.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: awssdk.String(in.stack.Outputs["NodeInstanceProfileName"])})
	if err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, r := range profile.InstanceProfile.Roles {
		roles = append(roles, awssdk.ToString(r.RoleName))
	}
	if !slices.Equal(roles, []string{in.stack.Outputs["NodeRoleName"]}) {
		t.Errorf("%s: instance profile roles %v, want only the node role", in.cluster, roles)
	}
}

// checkQueue: the queue the output names exists, keeps messages 5 minutes, and is encrypted.
func checkQueue(ctx context.Context, t *testing.T, sqsc *sqs.Client, in *installation) {
	t.Helper()
	u, err := sqsc.GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: awssdk.String(in.stack.Outputs["InterruptionQueueName"])})
	if err != nil {
		t.Fatalf("%s: %v", in.cluster, err)
	}
	attrs, err := sqsc.GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: u.QueueUrl, AttributeNames: []sqstypes.QueueAttributeName{sqstypes.QueueAttributeNameAll}})
	if err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]string{"QueueArn": in.stack.Outputs["InterruptionQueueArn"], "MessageRetentionPeriod": "300", "SqsManagedSseEnabled": "true"} {
		if got := attrs.Attributes[k]; got != want {
			t.Errorf("%s: queue attribute %s = %q, want %q", in.cluster, k, got, want)
		}
	}
}

// ruleDetailTypes are the events the interruption controller handles, one rule each.
var ruleDetailTypes = []string{
	"AWS Health Event",
	"EC2 Capacity Reservation Instance Interruption Warning",
	"EC2 Instance Rebalance Recommendation",
	"EC2 Instance State-change Notification",
	"EC2 Spot Instance Interruption Warning",
}

// checkRules: the stack's five rules are enabled, each matches one event type and targets only
// the stack's queue.
func checkRules(ctx context.Context, t *testing.T, eb *eventbridge.Client, in *installation) {
	t.Helper()
	rules, err := listRules(ctx, eb, "joiner-"+in.cluster+"-")
	if err != nil {
		t.Fatal(err)
	}
	var detailTypes []string
	for _, r := range rules {
		var pattern struct {
			DetailType []string `json:"detail-type"`
		}
		if err := json.Unmarshal([]byte(r.EventPattern), &pattern); err != nil {
			t.Errorf("%s: rule %s pattern %q: %v", in.cluster, r.Name, r.EventPattern, err)
		}
		detailTypes = append(detailTypes, pattern.DetailType...)
		if r.State != "ENABLED" || !slices.Equal(r.Targets, []string{in.stack.Outputs["InterruptionQueueArn"]}) {
			t.Errorf("%s: rule %s is %s with targets %v, want ENABLED with only the queue", in.cluster, r.Name, r.State, r.Targets)
		}
	}
	slices.Sort(detailTypes)
	if !slices.Equal(detailTypes, ruleDetailTypes) {
		t.Errorf("%s: the rules match %v, want one rule for each of %v", in.cluster, detailTypes, ruleDetailTypes)
	}
}
