package aws_test

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"sync"
	"time"

	awssdk "github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/providers/aws"
	"github.com/joiner-dev/joiner/testbed"
)

// fakeKubelet stands in, for moto's instances, for what runs on and around a real EC2 node: the
// kubelet that boots on each running instance of the cluster and registers its Node (with the
// labels, taints and resources its NodeClaim launched it with, and kwok's annotation, so that kwok
// makes it Ready and runs its pods), and the cloud controller manager's node lifecycle, which
// deletes the Node of an instance that is terminated or gone.
type fakeKubelet struct {
	ec2     *ec2.Client
	kube    client.Client
	cluster string
	every   time.Duration
	log     logr.Logger

	mu         sync.Mutex
	registered map[string]bool // instance IDs whose Node was created
	stop       context.CancelFunc
	done       chan struct{}
}

// startKubelet starts syncing every interval until stop.
func startKubelet(ec2c *ec2.Client, kube client.Client, cluster string, every time.Duration, log logr.Logger) *fakeKubelet {
	ctx, cancel := context.WithCancel(context.Background())
	k := &fakeKubelet{ec2: ec2c, kube: kube, cluster: cluster, every: every, log: log,
		registered: map[string]bool{}, stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(k.done)
		tick := time.NewTicker(every)
		defer tick.Stop()
		for {
			if err := k.sync(ctx); err != nil && ctx.Err() == nil {
				k.log.Error(err, "sync nodes with moto's instances")
			}
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
			}
		}
	}()
	return k
}

// Stop stops syncing and waits for the last sync to end.
func (k *fakeKubelet) Stop() {
	k.stop()
	<-k.done
}

// liveInstances returns the pending and running instances tagged for the cluster, by provider ID.
func liveInstances(ctx context.Context, ec2c *ec2.Client, cluster string) (map[string]ec2types.Instance, error) {
	out := map[string]ec2types.Instance{}
	pages := ec2.NewDescribeInstancesPaginator(ec2c, &ec2.DescribeInstancesInput{Filters: []ec2types.Filter{
		{Name: awssdk.String("tag:" + awsv1.TagKubernetesClusterPrefix + cluster), Values: []string{"owned"}},
		{Name: awssdk.String("instance-state-name"), Values: []string{"pending", "running"}},
	}})
	for pages.HasMorePages() {
		page, err := pages.NextPage(ctx)
		if err != nil {
			return nil, fmt.Errorf("describe the instances of cluster %s: %w", cluster, err)
		}
		for _, r := range page.Reservations {
			for _, i := range r.Instances {
				zone := ""
				if i.Placement != nil {
					zone = awssdk.ToString(i.Placement.AvailabilityZone)
				}
				out[aws.ProviderID(zone, awssdk.ToString(i.InstanceId))] = i
			}
		}
	}
	return out, nil
}

// sync registers the Node of every live instance whose NodeClaim has been launched, and deletes the
// Nodes of instances that are no longer live.
func (k *fakeKubelet) sync(ctx context.Context) error {
	live, err := liveInstances(ctx, k.ec2, k.cluster)
	if err != nil {
		return err
	}
	var errs []error
	for providerID, inst := range live {
		if err := k.register(ctx, providerID, inst); err != nil {
			errs = append(errs, err)
		}
	}
	nodes := &corev1.NodeList{}
	if err := k.kube.List(ctx, nodes); err != nil {
		return errors.Join(append(errs, fmt.Errorf("list nodes: %w", err))...)
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if !strings.HasPrefix(n.Spec.ProviderID, aws.ProviderIDPrefix) || n.DeletionTimestamp != nil {
			continue
		}
		if _, ok := live[n.Spec.ProviderID]; ok {
			continue
		}
		uid := n.UID
		if err := k.kube.Delete(ctx, n, client.Preconditions{UID: &uid}); err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("delete node %s of a gone instance: %w", n.Name, err))
			continue
		}
		k.log.V(1).Info("deleted the node of a terminated instance", "node", n.Name, "providerID", n.Spec.ProviderID)
	}
	return errors.Join(errs...)
}

// register creates the instance's Node once its NodeClaim carries the instance's provider ID, as
// the kubelet does when the instance boots with the user data the NodeClaim's launch template
// holds.
func (k *fakeKubelet) register(ctx context.Context, providerID string, inst ec2types.Instance) error {
	id := awssdk.ToString(inst.InstanceId)
	k.mu.Lock()
	done := k.registered[id]
	k.mu.Unlock()
	if done {
		return nil
	}
	claimName := ""
	for _, t := range inst.Tags {
		if awssdk.ToString(t.Key) == awsv1.TagNodeClaim {
			claimName = awssdk.ToString(t.Value)
		}
	}
	if claimName == "" {
		return nil
	}
	nc := &karpv1.NodeClaim{}
	if err := k.kube.Get(ctx, client.ObjectKey{Name: claimName}, nc); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // launched for a NodeClaim that is gone: garbage collection's business
		}
		return fmt.Errorf("get nodeclaim %s of instance %s: %w", claimName, id, err)
	}
	if nc.Status.ProviderID != providerID || nc.DeletionTimestamp != nil {
		return nil // not launched yet, or going away
	}
	node := nodeFor(id, providerID, nc)
	if err := k.kube.Create(ctx, node); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("register node %s of instance %s: %w", node.Name, id, err)
	}
	k.mu.Lock()
	k.registered[id] = true
	k.mu.Unlock()
	k.log.V(1).Info("registered node", "node", node.Name, "nodeclaim", nc.Name, "providerID", providerID)
	return nil
}

// nodeFor is the Node the kubelet of the instance registers: named by instance (EC2's
// resource-name hostnames), with the NodeClaim's labels, its taints and startup taints plus
// karpenter.sh/unregistered, and its capacity and allocatable.
func nodeFor(instanceID, providerID string, nc *karpv1.NodeClaim) *corev1.Node {
	name := instanceID + ".ec2.internal"
	labels := maps.Clone(nc.Labels)
	if labels == nil {
		labels = map[string]string{}
	}
	labels[corev1.LabelHostname] = name
	taints := cloudprovider.RegistrationTaints(nc)
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      labels,
			Annotations: map[string]string{testbed.KwokNodeAnnotation: testbed.KwokNodeAnnotationValue},
		},
		Spec: corev1.NodeSpec{ProviderID: providerID, Taints: taints},
		Status: corev1.NodeStatus{
			Capacity:    nc.Status.Capacity.DeepCopy(),
			Allocatable: nc.Status.Allocatable.DeepCopy(),
			NodeInfo:    corev1.NodeSystemInfo{Architecture: labels[corev1.LabelArchStable], OperatingSystem: karpv1.OSLinux},
		},
	}
}
