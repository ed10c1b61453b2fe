package operator

import (
	"context"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	apischeme "github.com/joiner-dev/joiner/api/scheme"
	"github.com/joiner-dev/joiner/cloudprovider/fake"
	"github.com/joiner-dev/joiner/controllers/provisioning/scheduling"
	"github.com/joiner-dev/joiner/controllers/state"
	"github.com/joiner-dev/joiner/testbed"
	"github.com/joiner-dev/joiner/testsupport/fixtures"
)

// benchPods and benchNodes are the cluster the listing benchmarks read: 10,000 Running pods of one
// ReplicaSet, 250m / 256Mi each, on 100 Nodes, as the kubelet (kwok) reports them.
const (
	benchPods  = 10000
	benchNodes = 100
)

// benchCluster is started once per benchmark binary: a real apiserver holding the pods, read through
// the operator's informer cache (cacheOptions), as the provisioner and the disruption controller read
// them.
var benchCluster struct {
	once   sync.Once
	err    error
	env    *testbed.Env
	reader client.Reader
	// cacheBytesPerPod is how much the heap grew per pod when the cache synced.
	cacheBytesPerPod float64
}

func readerOf10kPods(b *testing.B) client.Reader {
	b.Helper()
	benchCluster.once.Do(func() { benchCluster.err = startBenchCluster() })
	if benchCluster.err != nil {
		b.Fatal(benchCluster.err)
	}
	b.Cleanup(func() {}) // the control plane stops with the process (testbed's parent-death signal)
	return benchCluster.reader
}

func startBenchCluster() error {
	ctx := context.Background()
	env, err := testbed.Start(ctx, testbed.Options{CRDDirs: []string{filepath.Join("..", "config", "crd", "bases")}})
	if err != nil {
		return err
	}
	benchCluster.env = env
	scheme, err := apischeme.New()
	if err != nil {
		return err
	}
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = 2000, 4000
	kube, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return fmt.Errorf("client: %w", err)
	}
	if err := createBenchObjects(ctx, kube); err != nil {
		return err
	}
	opts := cacheOptions()
	opts.Scheme = scheme
	c, err := cache.New(cfg, opts)
	if err != nil {
		return fmt.Errorf("cache: %w", err)
	}
	ctrllog.SetLogger(logr.Discard())
	before := heapInUse()
	go func() { _ = c.Start(ctx) }()
	if !c.WaitForCacheSync(ctx) {
		return fmt.Errorf("cache did not start")
	}
	// Informers start on first use, and a first read waits until they have synced.
	if _, err := state.ReadClusterState(ctx, c); err != nil {
		return fmt.Errorf("first read: %w", err)
	}
	benchCluster.cacheBytesPerPod = float64(heapInUse()-before) / benchPods
	benchCluster.reader = c
	return nil
}

func heapInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse
}

// createBenchObjects creates the Nodes and pods, 16 requests at a time, and gives each pod the
// status the kubelet would.
func createBenchObjects(ctx context.Context, kube client.Client) error {
	for i := range benchNodes {
		node := fixtures.Node(fmt.Sprintf("node-%d", i))
		node.ResourceVersion = ""
		if err := kube.Create(ctx, &node); err != nil {
			return fmt.Errorf("create node: %w", err)
		}
	}
	work := make(chan int)
	errs := make(chan error, 16)
	var wg sync.WaitGroup
	for range 16 {
		wg.Go(func() {
			for i := range work {
				if err := createBenchPod(ctx, kube, i); err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for i := range benchPods {
		work <- i
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return err
	default:
		return nil
	}
}

func createBenchPod(ctx context.Context, kube client.Client, i int) error {
	now := metav1.NewTime(time.Now())
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("inflate-%d", i), Namespace: "default", Labels: map[string]string{"app": "inflate"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "inflate-5d4f7c", UID: types.UID("3f1c2a9e-0000-4000-8000-000000000001"),
				Controller: new(true), BlockOwnerDeletion: new(true)}}},
		Spec: corev1.PodSpec{
			NodeName:                      fmt.Sprintf("node-%d", i%benchNodes),
			TerminationGracePeriodSeconds: new(int64(0)),
			Containers: []corev1.Container{{Name: "inflate", Image: "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU: resource.MustParse("250m"), corev1.ResourceMemory: resource.MustParse("256Mi")}}}},
			Tolerations: []corev1.Toleration{
				{Key: corev1.TaintNodeNotReady, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64(300))},
				{Key: corev1.TaintNodeUnreachable, Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: new(int64(300))},
			},
		},
	}
	if err := kube.Create(ctx, pod); err != nil {
		return fmt.Errorf("create pod: %w", err)
	}
	pod.Status = corev1.PodStatus{
		Phase: corev1.PodRunning, HostIP: "10.0.0.1", PodIP: fmt.Sprintf("10.1.%d.%d", i/250, i%250), StartTime: &now, QOSClass: corev1.PodQOSBurstable,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		},
		ContainerStatuses: []corev1.ContainerStatus{{Name: "inflate", Ready: true, Started: new(true),
			Image: "public.ecr.aws/eks-distro/kubernetes/pause:3.7", ImageID: "docker-pullable://pause@sha256:0000",
			ContainerID: fmt.Sprintf("containerd://%064d", i), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}}},
	}
	if err := kube.Status().Update(ctx, pod); err != nil {
		return fmt.Errorf("set pod status: %w", err)
	}
	return nil
}

// BenchmarkReadClusterState is one provisioning round's or disruption pass's listing of 10,000
// pods (and the rest of the cluster) from the informer cache. cache-B/pod is the heap the cache
// holds per pod.
func BenchmarkReadClusterState(b *testing.B) {
	reader := readerOf10kPods(b)
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		s, err := state.ReadClusterState(ctx, reader)
		if err != nil {
			b.Fatal(err)
		}
		if len(s.Pods) != benchPods {
			b.Fatalf("listed %d pods, want %d", len(s.Pods), benchPods)
		}
	}
	b.ReportMetric(benchCluster.cacheBytesPerPod, "cache-B/pod")
}

// BenchmarkSnapshot is the listing plus the scheduling input built from it (state.BuildInput), as a
// provisioning round makes it.
func BenchmarkSnapshot(b *testing.B) {
	reader := readerOf10kPods(b)
	ctx := context.Background()
	cp := fake.New(fake.InstanceTypes(4)...)
	b.ReportAllocs()
	for b.Loop() {
		s, err := state.ReadClusterState(ctx, reader)
		if err != nil {
			b.Fatal(err)
		}
		in, err := state.BuildInput(ctx, cp, s, nil, scheduling.Options{}, logr.Discard())
		if err != nil {
			b.Fatal(err)
		}
		if len(in.ExistingNodes) != benchNodes {
			b.Fatalf("%d existing nodes, want %d", len(in.ExistingNodes), benchNodes)
		}
	}
}
