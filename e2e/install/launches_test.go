package install_test

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/e2e/framework"
)

// app labels the test's pods. Each asks for one CPU and repels the others from its node (required
// pod anti-affinity on the host name), so every pod needs a node of its own: the right number of
// NodeClaims and of instances is the number of pods.
const app = "inflate"

// launches records every NodeClaim and every instance of the cluster it ever sees, sampled every
// 200 ms against the pods created so far, and the first time one pod has more than one.
type launches struct {
	sampler *framework.Sampler
	mu      sync.Mutex
	pods    int
	claims  map[string]bool
	// instances maps each instance ID ever seen to the NodeClaim it was launched for.
	instances map[string]string
}

func sampleLaunches() *launches {
	l := &launches{claims: map[string]bool{}, instances: map[string]string{}}
	l.sampler = framework.Sample(l.check)
	return l
}

// check returns what is wrong: more NodeClaims or instances than pods, or two instances of one
// NodeClaim. The pod count is read first: a NodeClaim can only follow its pod.
func (l *launches) check(ctx context.Context) string {
	l.mu.Lock()
	pods := l.pods
	l.mu.Unlock()
	list := &karpv1.NodeClaimList{}
	if err := cluster.Client.List(ctx, list); err != nil {
		return ""
	}
	instances, err := clusterInstances(ctx, nil)
	if err != nil {
		return ""
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, nc := range list.Items {
		l.claims[nc.Name] = true
	}
	byClaim := map[string][]string{}
	for id, claim := range instances {
		l.instances[id] = claim
	}
	for id, claim := range l.instances {
		byClaim[claim] = append(byClaim[claim], id)
	}
	for claim, ids := range byClaim {
		if len(ids) > 1 {
			return fmt.Sprintf("NodeClaim %s launched %d instances: %v", claim, len(ids), ids)
		}
	}
	switch {
	case len(l.claims) > pods:
		return fmt.Sprintf("%d NodeClaims created for %d pods: %v", len(l.claims), pods, slices.Sorted(maps.Keys(l.claims)))
	case len(l.instances) > pods:
		return fmt.Sprintf("%d instances launched for %d pods: %v", len(l.instances), pods, l.instances)
	}
	return ""
}

// finish stops sampling, fails on a violation, and checks that every pod got exactly one NodeClaim
// and one instance.
func (l *launches) finish(t *testing.T) {
	t.Helper()
	l.sampler.Finish(t, "no NodeClaim or instance launched twice")
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.claims) != l.pods || len(l.instances) != l.pods {
		t.Errorf("%d pods got %d NodeClaims and %d instances in all, want one each", l.pods, len(l.claims), len(l.instances))
	}
}

// createPod creates the pending pod app-i, counted before it exists, and returns its creation time.
func (l *launches) createPod(t *testing.T, i int) time.Time {
	t.Helper()
	l.mu.Lock()
	l.pods++
	l.mu.Unlock()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", app, i), Namespace: "default", Labels: map[string]string{"app": app}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: ptr.To[int64](0),
			Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				TopologyKey: corev1.LabelHostname, LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": app}}}}}},
			Containers: []corev1.Container{{Name: "app", Image: "registry.k8s.io/pause:3.10",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}},
		},
	}
	if err := cluster.Client.Create(context.Background(), pod); err != nil {
		t.Fatalf("create pod %s: %v", pod.Name, err)
	}
	t.Cleanup(func() {
		if err := cluster.Client.Delete(context.Background(), pod); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete pod %s: %v", pod.Name, err)
		}
	})
	return time.Now()
}

// clusterInstances returns the instances of the cluster in moto (states: nil for every state), by
// ID, with the NodeClaim each was launched for.
func clusterInstances(ctx context.Context, states []string) (map[string]string, error) {
	filters := []ec2types.Filter{{Name: awssdk.String("tag:" + awsv1.TagKubernetesClusterPrefix + account.ClusterName), Values: []string{"owned"}}}
	if states != nil {
		filters = append(filters, ec2types.Filter{Name: awssdk.String("instance-state-name"), Values: states})
	}
	out := map[string]string{}
	pages := ec2.NewDescribeInstancesPaginator(ec2c, &ec2.DescribeInstancesInput{Filters: filters})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describe the cluster's instances: %w", err)
		}
		for _, r := range page.Reservations {
			for _, inst := range r.Instances {
				claim := ""
				for _, tag := range inst.Tags {
					if awssdk.ToString(tag.Key) == awsv1.TagNodeClaim {
						claim = awssdk.ToString(tag.Value)
					}
				}
				out[awssdk.ToString(inst.InstanceId)] = claim
			}
		}
	}
	return out, nil
}

// waitClaims waits until n NodeClaims exist, each launched with an instance running in moto, and
// returns when the n-th NodeClaim was first seen.
func waitClaims(t *testing.T, n int, timeout time.Duration) time.Time {
	t.Helper()
	var first time.Time
	framework.Eventually(t, timeout, fmt.Sprintf("%d NodeClaims with instances in moto", n), func(ctx context.Context) (bool, error) {
		list := &karpv1.NodeClaimList{}
		if err := cluster.Client.List(ctx, list); err != nil || len(list.Items) < n {
			return false, nil
		}
		if first.IsZero() {
			first = time.Now()
		}
		running, err := clusterInstances(ctx, []string{"pending", "running"})
		if err != nil {
			return false, nil
		}
		launched := map[string]bool{}
		for _, claim := range running {
			launched[claim] = true
		}
		for _, nc := range list.Items {
			if nc.Status.ProviderID == "" || !launched[nc.Name] {
				return false, nil
			}
		}
		return true, nil
	})
	return first
}
