// Package install_test installs Joiner as a user would and checks it is highly available: the real
// helm binary installs charts/joiner, with a values file written for Karpenter, into a local control
// plane (kube-apiserver, kube-scheduler, kube-controller-manager from the test bed); the built joiner
// binary then runs twice, each process exactly as the rendered Deployment says (its args, its env
// with the downward API resolved, its user, and a token of the chart's own ServiceAccount, so the
// chart's RBAC is what is exercised), with the AWS provider against moto (a local AWS emulator,
// `pip install 'moto[server]==5.2.1'`). The test provisions pods, stops the leader (SIGTERM) and
// kills the next one (SIGKILL), measures each handover, checks that nothing is launched twice, and
// then upgrades and uninstalls the release.
//
// What a cluster has and this test bed has not, and what stands in for it, is said where it is
// stood in for: the pod's network and volumes (podRun), the kubelet's token and EKS's IRSA
// variables (podEnvironment), the webhook Service (serviceRoute) and the hook Job's pod
// (runHookPods). The Deployment's own pods stay Pending: there is no node for them (Joiner's nodes
// are excluded by the chart's affinity, and no Node registers for moto's instances here).
//
// moto_server must be on the PATH: without it the package fails, it does not skip.
package install_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/eks"
	ekstypes "github.com/aws/aws-sdk-go-v2/service/eks/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	apischeme "github.com/joiner-dev/joiner/api/scheme"
	"github.com/joiner-dev/joiner/e2e/framework"
	"github.com/joiner-dev/joiner/operator"
	"github.com/joiner-dev/joiner/providers/aws/awstest"
	"github.com/joiner-dev/joiner/testbed"
)

const (
	// clusterName is the EKS cluster of the seeded account, and settings.clusterName.
	clusterName = "e2e-install"
	releaseName = "joiner"
	namespace   = operator.DefaultNamespace
	// containerName, metricsPortName: the chart's controller container and its metrics port.
	containerName   = "controller"
	metricsPortName = "http-metrics"
	webhookSecret   = operator.DefaultSecretName
	instanceLabel   = "app.kubernetes.io/instance"
)

var (
	moto    *awstest.Moto
	account *awstest.Env
	// controllerRoleARN is the IAM role of the ServiceAccount's IRSA annotation; nodeRoleName the
	// node role of config/samples/aws (KarpenterNodeRole-<cluster>).
	controllerRoleARN, nodeRoleName string
	// ec2c talks to moto as the test, not as Joiner.
	ec2c      *ec2.Client
	cluster   *framework.Cluster
	clientset kubernetes.Interface
	tools     struct{ helm, kubectl, joiner string }
	// workDir holds the pods' directories, the values file and helm's folders.
	workDir string
	route   *serviceRoute
	front   *apiserverFront

	startedMu sync.Mutex
	started   []*replica
)

func TestMain(m *testing.M) { os.Exit(setup(m)) }

func setup(m *testing.M) int {
	ctx := context.Background()
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "e2e/install:", err); return 1 }
	var err error
	if moto, err = awstest.New(ctx); err != nil {
		return fail(fmt.Errorf("this package runs Joiner against moto and cannot run without it: %w", err))
	}
	defer func() { _ = moto.Close() }()
	if err := seedAccount(ctx); err != nil {
		return fail(err)
	}
	if workDir, err = os.MkdirTemp("", "joiner-e2e-install-"); err != nil {
		return fail(err)
	}
	defer func() { _ = os.RemoveAll(workDir) }()
	var cleanupTools func()
	if tools.kubectl, tools.joiner, cleanupTools, err = framework.Tools(); err != nil {
		return fail(err)
	}
	defer cleanupTools()
	// The pods' user (65532) runs the binary and reads its own folder.
	for _, dir := range []string{workDir, filepath.Dir(tools.joiner)} {
		if err := os.Chmod(dir, 0o755); err != nil {
			return fail(err)
		}
	}
	if tools.helm, err = findHelm(); err != nil {
		return fail(err)
	}
	// No CRDs: the chart's crds/ installs them.
	env, err := testbed.Start(ctx, testbed.Options{Scheduler: true, ControllerManager: true})
	if err != nil {
		return fail(err)
	}
	cluster = &framework.Cluster{Env: env}
	if err := clients(env); err != nil {
		_ = env.Stop()
		return fail(err)
	}
	if front, err = startAPIServerFront(env); err != nil {
		_ = env.Stop()
		return fail(err)
	}
	defer front.close()
	if err := writeHelmKubeconfig(ctx); err != nil {
		_ = env.Stop()
		return fail(err)
	}
	if route, err = startServiceRoute(); err != nil {
		_ = env.Stop()
		return fail(err)
	}
	defer route.close()
	return framework.Main(func() int {
		defer stopAll()
		return m.Run()
	}, cluster)
}

// clients builds the admin clients; the test samples NodeClaims and Leases every 100-200 ms while
// it does everything else, more than client-go's default 5 requests per second.
func clients(env *testbed.Env) error {
	scheme, err := apischeme.New()
	if err != nil {
		return err
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		return err
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 50, 100
	if cluster.Client, err = client.New(cfg, client.Options{Scheme: scheme}); err != nil {
		return fmt.Errorf("admin client: %w", err)
	}
	if clientset, err = kubernetes.NewForConfig(cfg); err != nil {
		return fmt.Errorf("admin clientset: %w", err)
	}
	return nil
}

// seedAccount creates what an account with an EKS cluster has before Karpenter's or Joiner's
// install: awstest's VPC, subnets, security groups, AMIs and interruption queue, the node role of
// the getting-started guide, the controller's IRSA role, and the EKS cluster itself (which the AWS
// provider asks for the endpoint, CA and service CIDR nodes join with).
func seedAccount(ctx context.Context) error {
	var err error
	if account, err = moto.SeedCluster(ctx, clusterName); err != nil {
		return err
	}
	ec2c = ec2.NewFromConfig(moto.Config)
	iamc := iam.NewFromConfig(moto.Config)
	nodeRoleName = "KarpenterNodeRole-" + clusterName
	if _, err := iamc.CreateRole(ctx, &iam.CreateRoleInput{RoleName: awssdk.String(nodeRoleName),
		AssumeRolePolicyDocument: awssdk.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Service":"ec2.amazonaws.com"},"Action":"sts:AssumeRole"}]}`)}); err != nil {
		return fmt.Errorf("create node role %s: %w", nodeRoleName, err)
	}
	role, err := iamc.CreateRole(ctx, &iam.CreateRoleInput{RoleName: awssdk.String(clusterName + "-joiner"),
		AssumeRolePolicyDocument: awssdk.String(`{"Version":"2012-10-17","Statement":[{"Effect":"Allow","Principal":{"Federated":"arn:aws:iam::` +
			awstest.AccountID + `:oidc-provider/oidc.eks.us-east-1.amazonaws.com"},"Action":"sts:AssumeRoleWithWebIdentity"}]}`)})
	if err != nil {
		return fmt.Errorf("create the controller's role: %w", err)
	}
	controllerRoleARN = awssdk.ToString(role.Role.Arn)
	var subnets []string
	for _, s := range account.PrivateSubnets {
		subnets = append(subnets, s.ID)
	}
	if _, err := eks.NewFromConfig(moto.Config).CreateCluster(ctx, &eks.CreateClusterInput{Name: awssdk.String(clusterName),
		RoleArn: role.Role.Arn, Version: awssdk.String(awstest.PublishedKubernetesVersions[len(awstest.PublishedKubernetesVersions)-1]),
		ResourcesVpcConfig: &ekstypes.VpcConfigRequest{SubnetIds: subnets, SecurityGroupIds: []string{account.ClusterSecurityGroup.ID}}}); err != nil {
		return fmt.Errorf("create EKS cluster %s: %w", clusterName, err)
	}
	return nil
}

// register records a started replica so that the package stops it whatever happens.
func register(r *replica) {
	startedMu.Lock()
	defer startedMu.Unlock()
	started = append(started, r)
}

// stopAll stops every replica still running.
func stopAll() {
	startedMu.Lock()
	defer startedMu.Unlock()
	for _, r := range started {
		r.stop(10 * time.Second)
	}
}

// within is how long a step may take before the test gives up on it.
const within = 90 * time.Second
