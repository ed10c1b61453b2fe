package aws

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/go-logr/logr"
	"k8s.io/apimachinery/pkg/types"
	testingclock "k8s.io/utils/clock/testing"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/providers/aws/awstest"
)

// failingTags makes the first fail CreateTags calls fail.
type failingTags struct {
	EC2API
	fail int
}

func (f *failingTags) CreateTags(ctx context.Context, in *ec2.CreateTagsInput, opts ...func(*ec2.Options)) (*ec2.CreateTagsOutput, error) {
	if f.fail > 0 {
		f.fail--
		return nil, errors.New("injected CreateTags failure")
	}
	return f.EC2API.CreateTags(ctx, in, opts...)
}

// taggerCase is a NodeClaim the tagger reconciles once, and what that does.
type taggerCase struct {
	name     string
	launch   func(t *testing.T, f *motoFixture) *karpv1.NodeClaim
	nodeName string
	marked   bool // the NodeClaim is already marked tagged
	failTags int  // CreateTags calls that fail
	// wantTags are instance tags besides karpenter.sh/nodeclaim and eks:eks-cluster-name, which
	// every tagged instance has; nil skips the tag check.
	wantTags   map[string]string
	wantCalls  int // CreateTags
	wantMarked bool
	wantErr    bool
}

// TestMotoTaggerTagsRegisteredNodeClaims: the instance of a registered NodeClaim gets Name (the
// Node) and karpenter.sh/nodeclaim, once, without overwriting a tag it has, and the NodeClaim is
// marked as Karpenter marks it; unregistered, already marked or gone NodeClaims cost no
// CreateTags, and a failed CreateTags is an error for the controller to retry, with no mark.
func TestMotoTaggerTagsRegisteredNodeClaims(t *testing.T) {
	const node = "ip-10-0-1-17.ec2.internal"
	joiner := func(t *testing.T, f *motoFixture) *karpv1.NodeClaim {
		nc, err := f.p.Create(context.Background(), nodeClaim("1", m5Family))
		if err != nil {
			t.Fatal(err)
		}
		return nc
	}
	karpenterNamed := func(name string) func(*testing.T, *motoFixture) *karpv1.NodeClaim {
		return func(t *testing.T, f *motoFixture) *karpv1.NodeClaim {
			k := karpenterLaunch(f, "default")
			if name != "" {
				k.Tags = map[string]string{awsv1.TagName: name}
			}
			return nodeClaimOf(launchAsKarpenter(t, f, k).ProviderID)
		}
	}
	gone := func(*testing.T, *motoFixture) *karpv1.NodeClaim {
		return nodeClaimOf(ProviderID(awstest.Zones[0], "i-0123456789abcdef0"))
	}
	for _, tc := range []taggerCase{
		{name: "joiner's instance gets its Name", launch: joiner, nodeName: node,
			wantTags: map[string]string{awsv1.TagName: node}, wantCalls: 1, wantMarked: true},
		{name: "karpenter's instance gets its nodeclaim tag", launch: karpenterNamed(""), nodeName: node,
			wantTags: map[string]string{awsv1.TagName: node}, wantCalls: 1, wantMarked: true},
		{name: "a Name from spec.tags is kept", launch: karpenterNamed("payments"), nodeName: node,
			wantTags: map[string]string{awsv1.TagName: "payments"}, wantCalls: 1, wantMarked: true},
		{name: "not registered", launch: joiner},
		{name: "already marked", launch: karpenterNamed(""), nodeName: node, marked: true, wantMarked: true},
		{name: "instance gone", launch: gone, nodeName: node},
		{name: "CreateTags fails", launch: joiner, nodeName: node, failTags: 1, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) { runTaggerCase(t, tc) })
	}
}

func runTaggerCase(t *testing.T, tc taggerCase) {
	f := newMotoFixture(t, Options{})
	ctx := context.Background()
	nc := registered(t, f, tc.launch(t, f), tc.nodeName)
	id, err := ParseProviderID(nc.Status.ProviderID)
	if err != nil {
		t.Fatal(err)
	}
	if tc.marked {
		nc.Annotations = withEntries(nc.Annotations, map[string]string{awsv1.AnnotationClaimTagged: "true", AnnotationClusterNameTagged: "true"})
		if err := f.kube.Update(ctx, nc); err != nil {
			t.Fatal(err)
		}
	}
	f.p.opts.EC2 = &failingTags{EC2API: f.p.opts.EC2, fail: tc.failTags}
	tg := newTagger(f.kube, f.p, testingclock.NewFakeClock(time.Now()), discard())
	tg.interval = 0
	f.faults.ResetCalls()
	_, err = tg.Reconcile(ctx, reconcile.Request{NamespacedName: types.NamespacedName{Name: nc.Name}})
	if (err != nil) != tc.wantErr {
		t.Fatalf("Reconcile error %v, want an error: %t", err, tc.wantErr)
	}
	if got := f.faults.Calls()["ec2:CreateTags"]; got != tc.wantCalls {
		t.Errorf("%d CreateTags calls, want %d", got, tc.wantCalls)
	}
	if err := f.kube.Get(ctx, clientKey(nc.Name), nc); err != nil {
		t.Fatal(err)
	}
	marked := nc.Annotations[awsv1.AnnotationClaimTagged] == "true" && nc.Annotations[AnnotationClusterNameTagged] == "true"
	if marked != tc.wantMarked {
		t.Errorf("NodeClaim marked tagged: %t, want %t (annotations %v)", marked, tc.wantMarked, nc.Annotations)
	}
	if tc.wantTags == nil {
		return
	}
	tags, err := awstest.InstanceTags(ctx, f.ec2, id)
	if err != nil {
		t.Fatal(err)
	}
	checkEntries(t, "instance tag", tags, withEntries(tc.wantTags, map[string]string{awsv1.TagNodeClaim: nc.Name, awsv1.TagEKSClusterName: f.env.ClusterName}))
	// Once marked, the NodeClaim is not tagged again.
	f.faults.ResetCalls()
	reconcileTagger(t, tg, nc.Name)
	if calls := f.faults.Calls(); calls["ec2:CreateTags"]+calls["ec2:DescribeInstances"] != 0 {
		t.Errorf("a second reconcile called EC2: %v", calls)
	}
}

// TestMotoTaggerRetriesAFailedCreateTags: after a failed CreateTags the next attempt tags.
func TestMotoTaggerRetriesAFailedCreateTags(t *testing.T) {
	f := newMotoFixture(t, Options{})
	launched, err := f.p.Create(context.Background(), nodeClaim("1", m5Family))
	if err != nil {
		t.Fatal(err)
	}
	nc := registered(t, f, launched, "ip-10-0-1-18.ec2.internal")
	f.p.opts.EC2 = &failingTags{EC2API: f.p.opts.EC2, fail: 1}
	tg := newTagger(f.kube, f.p, testingclock.NewFakeClock(time.Now()), discard())
	tg.interval = 0
	req := reconcile.Request{NamespacedName: types.NamespacedName{Name: nc.Name}}
	if _, err := tg.Reconcile(context.Background(), req); err == nil {
		t.Fatal("the failed CreateTags was not reported for a retry")
	}
	reconcileTagger(t, tg, nc.Name)
	id, _ := ParseProviderID(nc.Status.ProviderID)
	tags, err := awstest.InstanceTags(context.Background(), f.ec2, id)
	if err != nil {
		t.Fatal(err)
	}
	checkEntries(t, "instance tag", tags, map[string]string{awsv1.TagName: "ip-10-0-1-18.ec2.internal"})
}

// TestTaggerSpacesCreateTags: the second CreateTags waits for the interval after the first.
func TestTaggerSpacesCreateTags(t *testing.T) {
	clk := testingclock.NewFakeClock(time.Now())
	tg := &tagger{clock: clk, interval: time.Second}
	if err := tg.wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- tg.wait(context.Background()) }()
	deadline := time.Now().Add(10 * time.Second)
	for !clk.HasWaiters() {
		if time.Now().After(deadline) {
			t.Fatal("the second wait did not wait on the clock")
		}
		time.Sleep(time.Millisecond)
	}
	select {
	case <-done:
		t.Fatal("the second wait returned before the interval passed")
	default:
	}
	clk.Step(time.Second)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

// registered stores the launched NodeClaim as registered to the Node nodeName ("": not yet).
func registered(t *testing.T, f *motoFixture, launched *karpv1.NodeClaim, nodeName string) *karpv1.NodeClaim {
	t.Helper()
	nc := launched.DeepCopy()
	nc.ResourceVersion = ""
	nc.Status.NodeName = nodeName
	status := nc.Status
	if err := f.kube.Create(context.Background(), nc); err != nil {
		t.Fatal(err)
	}
	nc.Status = status
	if err := f.kube.Status().Update(context.Background(), nc); err != nil {
		t.Fatal(err)
	}
	return nc
}

func reconcileTagger(t *testing.T, tg *tagger, name string) {
	t.Helper()
	if _, err := tg.Reconcile(context.Background(), reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}); err != nil {
		t.Fatal(err)
	}
}

func discard() logr.Logger { return logr.Discard() }
