package install_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/e2e/framework"
)

// sigtermWithin is the target of a stopped leader's handover ("in seconds"): the old leader
// releases its Lease as it stops, so the follower takes it at its next retry.
const sigtermWithin = 10 * time.Second

// TestInstallAsAUserWould installs the chart with a Karpenter values file, runs the Deployment's
// two replicas, provisions three pods against moto, stops the leader (SIGTERM) and then kills the
// next one (SIGKILL) with a new pod pending each time, and requires: a new leader working within
// seconds after SIGTERM and within the lease's bound after SIGKILL, every pod with exactly one
// NodeClaim and one instance (sampled throughout), the webhooks admitting through either replica;
// then an upgrade that the replicas run with, and an uninstall that leaves no webhook
// configuration and nothing of the chart behind.
func TestInstallAsAUserWould(t *testing.T) {
	values := installChart(t)
	deploy := renderedDeployment(t)
	if n := ptr.Deref(deploy.Spec.Replicas, 1); n != 2 {
		t.Fatalf("the Deployment has %d replicas, want the values' 2", n)
	}
	replicas := startPods(t, deploy, "joiner-a", "joiner-b")
	logRun(t, replicas[0])
	serveWebhooks(t, replicas)
	createSamples(t)
	for _, r := range replicas {
		if route.servedBy()[r.pod] == 0 {
			t.Errorf("pod %s served no admission review of the samples (reviews by pod: %v), want both replicas serving", r.pod, route.servedBy())
		}
	}

	l := sampleLaunches()
	for i := range 3 {
		l.createPod(t, i)
	}
	waitClaims(t, 3, within)
	// The SDK sends AssumeRoleWithWebIdentity unsigned, so moto's front counts it without a service.
	if moto.Calls(":AssumeRoleWithWebIdentity") == 0 {
		t.Errorf("no replica assumed the IRSA role of the ServiceAccount's annotation (sts:AssumeRoleWithWebIdentity)")
	}

	_, leader, term := handover(t, replicas, syscall.SIGTERM, l, 3)
	dryRunNodePool(t, "with one replica left")
	// The ReplicaSet replaces the stopped pod.
	replicas = []*replica{leader, startPods(t, deploy, "joiner-c")[0]}
	route.setBackends(replicas...)

	killed, leader, kill := handover(t, replicas, syscall.SIGKILL, l, 4)
	// The kubelet restarts the killed container, in the same pod.
	replicas = []*replica{leader, startPods(t, deploy, killed.pod)[0]}
	route.setBackends(replicas...)
	waitClaims(t, 5, within)
	l.finish(t)

	t.Logf("handover after SIGTERM: %.1f s; after SIGKILL: %.1f s", term.working.Seconds(), kill.working.Seconds())
	lease, retry := electionTimings(t, deploy)
	t.Logf("SIGTERM: %s; SIGKILL: %s; each until a pod created once the old process was gone had its NodeClaim (lease duration %s, retry period %s: a killed leader's Lease is free after at most %s)",
		term, kill, lease, retry, leaseBound(lease, retry))
	if term.working > sigtermWithin {
		t.Errorf("a stopped leader was replaced, and its successor working, after %s, want within %s", term.working, sigtermWithin)
	}
	if kill.lease > leaseBound(lease, retry) {
		t.Errorf("a killed leader's Lease was taken after %s, want within %s", kill.lease, leaseBound(lease, retry))
	}

	replicas = upgrade(t, values, replicas)
	uninstall(t, replicas)
}

// logRun logs how a replica runs: the Deployment's args (ports mapped), its resolved environment,
// and its user.
func logRun(t *testing.T, r *replica) {
	t.Helper()
	env := make([]string, len(r.run.env))
	for i, e := range r.run.env {
		env[i] = e.Name + "=" + e.Value
	}
	user := "the test's own user (not root: runAsUser not applied)"
	if c := r.run.credential(); c != nil {
		user = fmt.Sprintf("uid %d gid %d groups %v", c.Uid, c.Gid, c.Groups)
	}
	t.Logf("pod %s runs: joiner %s; pod env %v; as %s; ports (container → local) %v → %v",
		r.pod, strings.Join(r.run.args, " "), env, user, r.run.containerPorts, r.run.localPorts)
}

// installChart runs helm install with the Karpenter values file and returns the file's path. It
// checks that the release is deployed and that the chart's crds/ installed every CRD.
func installChart(t *testing.T) string {
	t.Helper()
	values, err := writeValues()
	if err != nil {
		t.Fatal(err)
	}
	helm(t, "install", releaseName, chartDir, "--namespace", namespace, "--create-namespace", "--values", values)
	var status struct {
		Info struct{ Status string } `json:"info"`
	}
	if err := json.Unmarshal([]byte(helm(t, "status", releaseName, "--namespace", namespace, "--output", "json")), &status); err != nil {
		t.Fatalf("helm status: %v", err)
	}
	if status.Info.Status != "deployed" {
		t.Fatalf("release %s is %q, want deployed", releaseName, status.Info.Status)
	}
	for _, name := range chartCRDs(t) {
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := cluster.Client.Get(context.Background(), client.ObjectKey{Name: name}, crd); err != nil {
			t.Fatalf("CRD %s of the chart's crds/: %v", name, err)
		}
	}
	return values
}

// chartCRDs returns the names of the CRDs in the chart's crds/.
func chartCRDs(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(chartDir, "crds", "*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("the chart's crds/: %v (%d files)", err, len(files))
	}
	var names []string
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.Unmarshal(data, crd); err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		names = append(names, crd.Name)
	}
	return names
}

// renderedDeployment reads the release's Deployment back from the apiserver.
func renderedDeployment(t *testing.T) *appsv1.Deployment {
	t.Helper()
	list := &appsv1.DeploymentList{}
	if err := cluster.Client.List(context.Background(), list, client.InNamespace(namespace), client.MatchingLabels{instanceLabel: releaseName}); err != nil {
		t.Fatalf("list the release's Deployments: %v", err)
	}
	if len(list.Items) != 1 {
		t.Fatalf("the release has %d Deployments, want 1", len(list.Items))
	}
	return &list.Items[0]
}

// startPods starts one replica per pod name, at once, and waits until all are ready.
func startPods(t *testing.T, deploy *appsv1.Deployment, pods ...string) []*replica {
	t.Helper()
	out := make([]*replica, len(pods))
	errs := make(chan error, len(pods))
	for i, name := range pods {
		go func() {
			var err error
			out[i], err = startReplica(context.Background(), deploy, name)
			errs <- err
		}()
	}
	for range pods {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// serveWebhooks waits until Joiner has put its CA into every webhook of the release, then routes
// the webhook Service to the replicas through the stand-in (serviceRoute).
func serveWebhooks(t *testing.T, replicas []*replica) {
	t.Helper()
	var service string
	framework.Eventually(t, within, "Joiner's CA in every webhook configuration of the release", func(ctx context.Context) (bool, error) {
		configs, err := webhookClientConfigs(ctx)
		if err != nil || len(configs) == 0 {
			return false, nil
		}
		for _, cc := range configs {
			if len(cc.CABundle) == 0 || cc.Service == nil {
				return false, nil
			}
			service = cc.Service.Name
		}
		return true, nil
	})
	svc := &corev1.Service{}
	if err := cluster.Client.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: service}, svc); err != nil {
		t.Fatalf("the webhook Service %s: %v", service, err)
	}
	if err := route.serve(svc); err != nil {
		t.Fatal(err)
	}
	route.setBackends(replicas...)
	if err := route.pointConfigurations(context.Background()); err != nil {
		t.Fatal(err)
	}
}

// webhookClientConfigs returns the client configurations of every webhook of Joiner's
// configurations (by name prefix, whoever made them).
func webhookClientConfigs(ctx context.Context) ([]admissionregistrationv1.WebhookClientConfig, error) {
	mutating, validating := &admissionregistrationv1.MutatingWebhookConfigurationList{}, &admissionregistrationv1.ValidatingWebhookConfigurationList{}
	if err := cluster.Client.List(ctx, mutating); err != nil {
		return nil, err
	}
	if err := cluster.Client.List(ctx, validating); err != nil {
		return nil, err
	}
	var out []admissionregistrationv1.WebhookClientConfig
	for _, c := range mutating.Items {
		for _, w := range c.Webhooks {
			if strings.HasPrefix(c.Name, releaseName+"-") {
				out = append(out, w.ClientConfig)
			}
		}
	}
	for _, c := range validating.Items {
		for _, w := range c.Webhooks {
			if strings.HasPrefix(c.Name, releaseName+"-") {
				out = append(out, w.ClientConfig)
			}
		}
	}
	return out, nil
}

// createSamples applies config/samples/aws (an EC2NodeClass and a NodePool, as Karpenter's
// getting-started guide writes them) for the seeded cluster, through the webhooks, and waits until
// both are Ready.
func createSamples(t *testing.T) {
	t.Helper()
	nc, np := &awsv1.EC2NodeClass{}, &karpv1.NodePool{}
	for file, obj := range map[string]client.Object{"01-ec2nodeclass.yaml": nc, "02-nodepool.yaml": np} {
		data, err := os.ReadFile(filepath.Join("..", "..", "config", "samples", "aws", file))
		if err != nil {
			t.Fatal(err)
		}
		if err := yaml.UnmarshalStrict([]byte(strings.ReplaceAll(string(data), "CLUSTER_NAME", clusterName)), obj); err != nil {
			t.Fatalf("config/samples/aws/%s: %v", file, err)
		}
	}
	if nc.Spec.Role != nodeRoleName {
		t.Fatalf("the sample's node role is %q, want the seeded %q", nc.Spec.Role, nodeRoleName)
	}
	for _, obj := range []client.Object{nc, np} {
		if err := cluster.Client.Create(context.Background(), obj); err != nil {
			t.Fatalf("create %s %s through the webhooks: %v", obj.GetObjectKind().GroupVersionKind().Kind, obj.GetName(), err)
		}
	}
	framework.Eventually(t, within, "the sample EC2NodeClass and NodePool Ready", func(ctx context.Context) (bool, error) {
		gotNC, gotNP := &awsv1.EC2NodeClass{}, &karpv1.NodePool{}
		if cluster.Client.Get(ctx, client.ObjectKeyFromObject(nc), gotNC) != nil || cluster.Client.Get(ctx, client.ObjectKeyFromObject(np), gotNP) != nil {
			return false, nil
		}
		return meta.IsStatusConditionTrue(gotNC.Status.Conditions, awsv1.ConditionTypeReady) &&
			meta.IsStatusConditionTrue(gotNP.Status.Conditions, karpv1.ConditionTypeReady), nil
	})
}

// dryRunNodePool admits a copy of the sample NodePool without storing it: the webhooks (failure
// policy Fail) must answer through the replicas the stand-in Service routes to.
func dryRunNodePool(t *testing.T, when string) {
	t.Helper()
	np := &karpv1.NodePool{}
	if err := cluster.Client.Get(context.Background(), client.ObjectKey{Name: "default"}, np); err != nil {
		t.Fatal(err)
	}
	probe := &karpv1.NodePool{Spec: np.Spec}
	probe.Name = "admission-probe"
	if err := cluster.Client.Create(context.Background(), probe, client.DryRunAll); err != nil {
		t.Errorf("admit a NodePool %s: %v", when, err)
	}
}
