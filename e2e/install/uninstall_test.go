package install_test

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/e2e/framework"
)

// upgrade runs helm upgrade with one value changed (logLevel: debug) and rolls the replicas over to
// the new Deployment as its strategy says (maxSurge 1, maxUnavailable 0: a new pod ready before an
// old one stops). It returns the new replicas, once one of them leads.
//
// The stand-in Service's URLs are taken out of the webhook configurations first, and put back
// after: helm's three-way merge would add the rendered Service back beside the URL, which the
// apiserver refuses (a webhook has one or the other).
func upgrade(t *testing.T, values string, replicas []*replica) []*replica {
	t.Helper()
	ctx := context.Background()
	if err := route.restoreConfigurations(ctx); err != nil {
		t.Fatal(err)
	}
	helm(t, "upgrade", releaseName, chartDir, "--namespace", namespace, "--values", values, "--set", "logLevel=debug")
	deploy := renderedDeployment(t)
	if !slices.Contains(deploy.Spec.Template.Spec.Containers[0].Args, "--log-level=debug") {
		t.Fatalf("after helm upgrade --set logLevel=debug the Deployment's args are %v", deploy.Spec.Template.Spec.Containers[0].Args)
	}
	grace := time.Duration(ptr.Deref(deploy.Spec.Template.Spec.TerminationGracePeriodSeconds, 30)) * time.Second
	var next []*replica
	for i, old := range replicas {
		next = append(next, startPods(t, deploy, fmt.Sprintf("joiner-v2-%d", i))...)
		route.setBackends(append(slices.Clone(replicas[i+1:]), next...)...)
		old.stop(grace)
	}
	if err := route.pointConfigurations(ctx); err != nil {
		t.Fatal(err)
	}
	leader, _ := waitLeader(t, next, time.Time{}, within)
	dryRunNodePool(t, "after the upgrade")
	if !logHas(t, leader, `"level":"debug"`) {
		t.Errorf("the leader after the upgrade, %s, logged nothing at debug level (log in %s)", leader.pod, leader.logPath)
	}
	return next
}

// uninstall deletes the samples first, as a user does before removing Joiner, so that it
// terminates its instances while it runs; then runs helm uninstall, with the stand-in kubelet
// running the chart's pre-delete hook and stopping the replicas once their Deployment is deleted.
// It checks that the hook deleted the webhook configurations, and that nothing of the chart is left.
func uninstall(t *testing.T, replicas []*replica) {
	t.Helper()
	ctx := context.Background()
	removeSamples(t)
	objs := releaseObjects(t)
	hookCtx, stopHooks := context.WithCancel(ctx)
	defer stopHooks()
	hooks := runHookPods(hookCtx)
	stopped := stopWithDeployment(replicas)
	helm(t, "uninstall", releaseName, "--namespace", namespace, "--timeout", "2m")
	stopHooks()
	var runs []hookRun
	for run := range hooks {
		runs = append(runs, run)
	}
	if len(runs) == 0 {
		t.Errorf("helm uninstall ran no hook pod")
	}
	for _, run := range runs {
		if run.exitCode != 0 {
			t.Errorf("hook pod %s of Job %s (kubectl %v) exited %d:\n%s", run.pod, run.job, run.args, run.exitCode, run.output)
		} else {
			t.Logf("hook pod %s ran kubectl %s:\n%s", run.pod, strings.Join(run.args, " "), strings.TrimSpace(run.output))
		}
	}
	select {
	case <-stopped:
	case <-time.After(within):
		t.Fatalf("the replicas were not stopped after their Deployment was deleted")
	}
	checkNothingLeft(t, objs)
}

// removeSamples deletes the test's pods, the NodePool and the EC2NodeClass, and waits until every
// NodeClaim is gone and no instance of the cluster is left in moto.
func removeSamples(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	if err := cluster.Client.DeleteAllOf(ctx, &corev1.Pod{}, client.InNamespace("default"), client.MatchingLabels{"app": app}); err != nil {
		t.Fatalf("delete the pods: %v", err)
	}
	for _, obj := range []client.Object{&karpv1.NodePool{}, &awsv1.EC2NodeClass{}} {
		obj.SetName("default")
		if err := cluster.Client.Delete(ctx, obj); err != nil {
			t.Fatalf("delete %T default: %v", obj, err)
		}
	}
	framework.Eventually(t, within, "the NodeClaims, NodePool and EC2NodeClass gone, and their instances terminated", func(ctx context.Context) (bool, error) {
		claims := &karpv1.NodeClaimList{}
		if err := cluster.Client.List(ctx, claims); err != nil || len(claims.Items) > 0 {
			return false, nil
		}
		for _, obj := range []client.Object{&karpv1.NodePool{}, &awsv1.EC2NodeClass{}} {
			if err := cluster.Client.Get(ctx, client.ObjectKey{Name: "default"}, obj); !apierrors.IsNotFound(err) {
				return false, nil
			}
		}
		live, err := clusterInstances(ctx, []string{"pending", "running", "stopping", "stopped"})
		return err == nil && len(live) == 0, nil
	})
}

// stopWithDeployment stops the replicas, as the kubelet stops a deleted pod, once the release's
// Deployment is deleted; the returned channel is closed when they have stopped.
func stopWithDeployment(replicas []*replica) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = wait.PollUntilContextTimeout(context.Background(), 200*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
			d := &appsv1.Deployment{}
			err := cluster.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: releaseName}, d)
			return apierrors.IsNotFound(err) || (err == nil && d.DeletionTimestamp != nil), nil
		})
		for _, r := range replicas {
			r.stop(30 * time.Second)
		}
	}()
	return done
}

// checkNothingLeft checks that no webhook configuration of Joiner is left, that every object of
// the release (manifest and hooks) and its helm records are gone, and that no pod is left in the
// namespace. Helm keeps, by design, the CRDs of crds/ and the namespace --create-namespace made;
// the test checks the CRDs are still there and logs what Joiner itself created at run time.
func checkNothingLeft(t *testing.T, objs []*unstructured.Unstructured) {
	t.Helper()
	ctx := context.Background()
	if configs, err := webhookClientConfigs(ctx); err != nil || len(configs) > 0 {
		t.Errorf("after helm uninstall: %d webhooks of Joiner's configurations left (%v)", len(configs), err)
	}
	framework.Eventually(t, within, "every object of the release gone", func(ctx context.Context) (bool, error) {
		for _, obj := range objs {
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(obj.GroupVersionKind())
			if err := cluster.Client.Get(ctx, client.ObjectKeyFromObject(obj), got); !apierrors.IsNotFound(err) {
				return false, nil
			}
		}
		pods := &corev1.PodList{}
		return cluster.Client.List(ctx, pods, client.InNamespace(namespace)) == nil && len(pods.Items) == 0, nil
	})
	records := &corev1.SecretList{}
	if err := cluster.Client.List(ctx, records, client.InNamespace(namespace), client.MatchingLabels{"owner": "helm", "name": releaseName}); err != nil || len(records.Items) > 0 {
		t.Errorf("helm's release records left: %d (%v)", len(records.Items), err)
	}
	for _, name := range chartCRDs(t) {
		if err := cluster.Client.Get(ctx, client.ObjectKey{Name: name}, &apiextensionsv1.CustomResourceDefinition{}); err != nil {
			t.Errorf("CRD %s: %v; helm keeps the CRDs of crds/ on uninstall", name, err)
		}
	}
	t.Logf("after helm uninstall: %d objects of the release gone, no webhook configuration left; kept by helm's design: the CRDs and namespace %s; left in it by Joiner at run time: %s",
		len(objs), namespace, runtimeLeftovers(t))
}

// runtimeLeftovers names the Leases, Secrets and ConfigMaps left in the namespace (the root CA
// ConfigMap every namespace gets aside).
func runtimeLeftovers(t *testing.T) string {
	t.Helper()
	var names []string
	leases, secrets, configMaps := &coordinationv1.LeaseList{}, &corev1.SecretList{}, &corev1.ConfigMapList{}
	for _, list := range []client.ObjectList{leases, secrets, configMaps} {
		if err := cluster.Client.List(context.Background(), list, client.InNamespace(namespace)); err != nil {
			t.Fatalf("list %T: %v", list, err)
		}
	}
	for _, l := range leases.Items {
		names = append(names, "Lease/"+l.Name)
	}
	for _, s := range secrets.Items {
		names = append(names, "Secret/"+s.Name)
	}
	for _, c := range configMaps.Items {
		if c.Name != "kube-root-ca.crt" {
			names = append(names, "ConfigMap/"+c.Name)
		}
	}
	if len(names) == 0 {
		return "nothing"
	}
	return strings.Join(names, ", ")
}

// logHas reports whether the replica's log has a line containing text.
func logHas(t *testing.T, r *replica, text string) bool {
	t.Helper()
	data, err := os.ReadFile(r.logPath)
	if err != nil {
		t.Fatalf("read %s: %v", r.logPath, err)
	}
	return strings.Contains(string(data), text)
}
