// Package aws_test runs Joiner with the AWS provider on a full local cluster against moto (a local
// AWS emulator, `pip install 'moto[server]==5.2.1'`): Joiner resolves an EC2NodeClass, launches
// EC2 instances through CreateFleet for pending pods, routes around injected capacity errors,
// replaces a node on a spot interruption message from the SQS queue, and terminates every
// instance when the pods go. A stand-in kubelet (kubelet_test.go) registers the Node of each
// running instance for kwok to run pods on.
//
// moto_server must be on the PATH: without it the package fails, it does not skip.
package aws_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/config/cloudformation"
	"github.com/joiner-dev/joiner/controllers"
	"github.com/joiner-dev/joiner/controllers/disruption"
	"github.com/joiner-dev/joiner/controllers/disruption/planner"
	"github.com/joiner-dev/joiner/e2e/framework"
	"github.com/joiner-dev/joiner/operator"
	"github.com/joiner-dev/joiner/providers/aws"
	"github.com/joiner-dev/joiner/providers/aws/awstest"
	"github.com/joiner-dev/joiner/providers/aws/nodeclass"
	"github.com/joiner-dev/joiner/testbed"
)

// clusterName names the seeded AWS account's cluster; instances are tagged with it.
const clusterName = "e2e-aws"

var (
	moto    *awstest.Moto
	account *awstest.Env
	// faults is the HTTP transport of Joiner's AWS clients: it injects capacity errors into
	// CreateFleet and counts Joiner's AWS calls.
	faults  *awstest.Faults
	cluster *framework.Cluster
	// ec2c talks to moto directly, so the test's own calls are not counted as Joiner's.
	ec2c *ec2.Client

	providerMu sync.Mutex
	// provider is the AWS provider Joiner built (for its instance-type source).
	provider *aws.Provider
)

func TestMain(m *testing.M) { os.Exit(setup(m)) }

func setup(m *testing.M) int {
	ctx := context.Background()
	var err error
	if moto, err = awstest.New(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "e2e/aws: this package runs Joiner against moto and cannot run without it:", err)
		return 1
	}
	defer func() {
		if err := moto.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e/aws:", err)
		}
	}()
	if account, err = moto.SeedCluster(ctx, clusterName); err != nil {
		fmt.Fprintln(os.Stderr, "e2e/aws:", err)
		return 1
	}
	if err = useStack(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "e2e/aws:", err)
		return 1
	}
	ec2c = ec2.NewFromConfig(moto.Config)
	faults = awstest.NewFaults(nil)
	cfg := faults.Apply(moto.Config)

	logDir, err := os.MkdirTemp("", "joiner-e2e-aws-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e/aws:", err)
		return 1
	}
	providerLog, closeProviderLog, err := fileLogger(filepath.Join(logDir, "aws-provider.log"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e/aws:", err)
		return 1
	}
	defer closeProviderLog()
	kubeletLog, closeKubeletLog, err := fileLogger(filepath.Join(logDir, "fake-kubelet.log"))
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e/aws:", err)
		return 1
	}
	defer closeKubeletLog()

	factory := aws.Factory(aws.FactoryOptions{
		Options: aws.Options{
			ClusterName: account.ClusterName,
			// Nodes never boot: their kubelet is the stand-in, so the endpoint and CA are placeholders.
			ClusterEndpoint: "https://" + account.ClusterName + ".example.com", ClusterCABundle: "Q0E=", ServiceCIDR: "10.96.0.0/12",
			Log: providerLog,
		},
		Config: &cfg,
		NodeClass: nodeclass.Options{KubernetesVersion: func(context.Context) (string, error) {
			return awstest.PublishedKubernetesVersions[len(awstest.PublishedKubernetesVersions)-1], nil
		}},
		InterruptionQueue: account.QueueName,
	})
	cluster, err = framework.Start(ctx,
		testbed.Options{Scheduler: true, ControllerManager: true, Kwok: true, LogDir: logDir},
		operator.Options{
			CloudProvider: func(ctx context.Context, kube client.Client) (cloudprovider.CloudProvider, []cloudprovider.Controller, error) {
				cp, owned, err := factory(ctx, kube)
				if err != nil {
					return nil, nil, err
				}
				p, ok := cp.(*aws.Provider)
				if !ok {
					return nil, nil, errors.New("aws.Factory did not build an *aws.Provider")
				}
				providerMu.Lock()
				provider = p
				providerMu.Unlock()
				return cp, owned, nil
			},
			Controllers: controllers.Options{
				// The provisioner batches with its defaults (1 s idle, 10 s at most), so that the
				// ReplicaSet's pods of a scale-up land in one round.
				Disruption: disruption.Options{
					PollingPeriod: time.Second, ValidationDelay: 2 * time.Second, CommandTimeout: 2 * time.Minute,
					Planner: planner.Options{Cooldown: -1},
				},
			},
		})
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e/aws:", err, "(logs in", logDir+")")
		return 1
	}
	kubelet := startKubelet(ec2c, cluster.Client, account.ClusterName, 250*time.Millisecond, kubeletLog)
	code := framework.Main(func() int {
		defer kubelet.Stop()
		return m.Run()
	}, cluster)
	if code == 0 && os.Getenv("JOINER_TESTBED_KEEP") == "" {
		_ = os.RemoveAll(logDir)
	}
	return code
}

// useStack creates the stack of config/cloudformation/joiner.yaml for the cluster, as an install
// on EKS does, and points the test at what it created instead of the seeded account's: the node
// role (EC2NodeClass spec.role) and the interruption queue (with its EventBridge rules).
func useStack(ctx context.Context) error {
	cf := cloudformation.NewClient(moto.Config)
	name := "joiner-" + account.ClusterName
	if _, err := cf.Create(ctx, name, map[string]string{"ClusterName": account.ClusterName}); err != nil {
		return err
	}
	stack, err := cf.WaitCreated(ctx, name, 100*time.Millisecond)
	if err != nil {
		return err
	}
	q, err := sqs.NewFromConfig(moto.Config).GetQueueUrl(ctx, &sqs.GetQueueUrlInput{QueueName: awssdk.String(stack.Outputs["InterruptionQueueName"])})
	if err != nil {
		return fmt.Errorf("the stack's interruption queue: %w", err)
	}
	account.RoleName, account.RoleARN = stack.Outputs["NodeRoleName"], stack.Outputs["NodeRoleArn"]
	account.InstanceProfileName = stack.Outputs["NodeInstanceProfileName"]
	account.QueueName, account.QueueURL = stack.Outputs["InterruptionQueueName"], awssdk.ToString(q.QueueUrl)
	return nil
}

// fileLogger returns a logger writing to a new file at path, and a function closing it.
func fileLogger(path string) (logr.Logger, func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return logr.Logger{}, nil, fmt.Errorf("create log %s: %w", path, err)
	}
	var mu sync.Mutex
	log := funcr.New(func(prefix, args string) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintln(f, time.Now().Format(time.RFC3339Nano), prefix, args)
	}, funcr.Options{Verbosity: 1})
	return log, func() { _ = f.Close() }, nil
}

// awsProvider returns the provider Joiner built.
func awsProvider() *aws.Provider {
	providerMu.Lock()
	defer providerMu.Unlock()
	return provider
}
