package webhooks_test

import (
	"context"
	"fmt"
	"net/http"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	joinerv1alpha1 "github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/e2e/framework"
	"github.com/joiner-dev/joiner/operator"
	"github.com/joiner-dev/joiner/policy"
)

// reportedPolicy is the ProvisioningPolicy of issue 13 (defect 1), exactly as reported: one evaluation
// would build an array of a hundred million numbers, several gigabytes, in a single builtin call.
const reportedPolicy = `apiVersion: joiner.dev/v1alpha1
kind: ProvisioningPolicy
metadata:
  name: e2e-memory-reported
spec:
  enforcementAction: Deny
  match: {kinds: [NodePool]}
  rego: |
    package e2e.memoryreported

    violation contains {"msg": "mem"} if { count(numbers.range(1, 100000000)) < 0 }
`

// memoryStormLabel selects the NodePools the runaway policies of TestRunawayPolicies apply to, so that
// every other NodePool, including the harmless one created at the end, is admitted while they are
// installed.
const memoryStormLabel = "e2e.joiner.dev/memory-storm"

// memoryStormSize is how many NodePools are applied at once, as in the report.
const memoryStormSize = 4

// memoryStormWaves is how many times the NodePools are applied at once, one wave after the other, as a
// GitOps tool retries a refused apply. Each wave's evaluations begin while the garbage the previous
// wave's stopped evaluations left is still uncollected.
const memoryStormWaves = 3

// heapSampleInterval is how often the test reads the heap of its process, which is Joiner's.
const heapSampleInterval = 50 * time.Millisecond

// liveHeapMargin is what the live heap may hold above its size at the start plus the policy memory
// budget: the requests in flight, what the rest of Joiner allocated meanwhile, and what an evaluation
// allocates between two of the engine's heap samples before it is stopped.
const liveHeapMargin = 96 << 20

// shippedMemoryLimit is the container memory limit the manifests and the chart ship with
// (config/manager, charts/joiner); the Go memory limit is operator.MemoryLimitPercent of it.
const shippedMemoryLimit = 1 << 30

// runawayPolicy is a Deny policy whose evaluation would take the operator's memory, with what its
// denials must say.
type runawayPolicy struct {
	name  string
	storm string // the value of memoryStormLabel it applies to
	rego  string
	// params are the policy's parameters: the bounds come from them, so that Validate cannot refuse
	// the policy at kubectl apply and the engine has to stop it while it runs.
	params string
	// cause are substrings that name what stopped the policy, in every denial and in the audit's record.
	cause []string
}

// Issue 13, defect 1: a platform engineer who applies the policy of the report is told at kubectl apply
// that it would build a hundred million numbers and what the bound is. Variants the webhook cannot refuse
// statically, because their sizes come from input.parameters, are admitted. Four NodePools they apply to
// are applied at once, three times over as a GitOps tool retries, and each is denied within the webhook
// timeout with a message naming the policy and the bound that stopped it: the builtin size cap, or the
// engine's memory budget for a comprehension of ranges each under the cap. The audit records the same
// failures. Throughout, what Joiner's heap holds live stays within its size at the start plus the budget
// and a margin, and with the garbage not yet collected far below the Go memory limit of the shipped
// container; and Joiner goes on admitting the NodePools the policies do not apply to.
func TestRunawayPolicies(t *testing.T) {
	ctx := context.Background()
	cluster.EnsureNodeClass(t)
	heap := startHeapSampler()
	t.Cleanup(func() {
		heap.stop() // also when a step below fails
		// Hand the tests that follow a heap without the stopped evaluations' garbage.
		runtime.GC()
	})

	t.Run("the reported policy is refused at kubectl apply", func(t *testing.T) {
		out, err := kubectlRun(t, reportedPolicy, "apply", "-f", "-")
		if err == nil {
			_, _ = kubectlRun(t, reportedPolicy, "delete", "-f", "-")
			t.Fatalf("the policy of issue 13 was admitted:\n%s", out)
		}
		for _, want := range []string{"e2e-memory-reported", "numbers.range(1, 100000000) would build an array of 100000000 numbers",
			fmt.Sprintf("a policy may build at most %d", policy.MaxBuiltinArrayLength)} {
			if !strings.Contains(out, want) {
				t.Errorf("kubectl apply's refusal lacks %q:\n%s", want, out)
			}
		}
		err = c.Get(ctx, types.NamespacedName{Name: "e2e-memory-reported"}, &joinerv1alpha1.ProvisioningPolicy{})
		if !apierrors.IsNotFound(err) {
			t.Errorf("get the refused policy: err = %v, want NotFound", err)
		}
	})

	budget := fmt.Sprintf("past the policy memory budget of %.1f MiB", float64(policy.DefaultMemoryBudget)/(1<<20))
	runaways := []runawayPolicy{
		{
			name: "e2e-memory-range", storm: "range", params: `{"n": 100000000}`,
			rego: `package e2e.memoryrange

violation contains {"msg": "mem"} if {
	input.review.object.metadata.labels["` + memoryStormLabel + `"] == "range"
	count(numbers.range(1, input.parameters.n)) < 0
}
`,
			cause: []string{"numbers.range would build 100000000 elements",
				fmt.Sprintf("one builtin call may build at most %d elements", policy.MaxBuiltinArrayLength)},
		},
		{
			// Every range is under the builtin cap; what grows is the comprehension, by one number
			// padded to width bytes per element. With small elements (x := i * j) the heap grows by less
			// than 100 MiB within the 2 s evaluation deadline on a busy two-core machine, so the deadline,
			// not the budget, would stop the policy; strings of a megabyte, which the collector need not
			// scan, reach the budget in about a second.
			name: "e2e-memory-heap", storm: "heap", params: `{"n": 90000, "width": 1000000}`,
			rego: `package e2e.memoryheap

violation contains {"msg": "mem"} if {
	input.review.object.metadata.labels["` + memoryStormLabel + `"] == "heap"
	xs := [x | some i in numbers.range(1, 90000); some j in numbers.range(1, input.parameters.n); x := sprintf("%*d", [input.parameters.width, i * j])]
	count(xs) < 0
}
`,
			cause: []string{"policy e2e-memory-heap: evaluation stopped: the heap grew by ", budget},
		},
	}

	// One NodePool per runaway policy exists before the policies, for the audit to evaluate.
	for _, rp := range runaways {
		audited := memoryNodePool("e2e-memory-audited-"+rp.storm, rp.storm)
		if err := c.Create(ctx, audited); err != nil {
			t.Fatalf("create NodePool %s before the policies: %v", audited.Name, err)
		}
		deleteNodePool(t, audited.Name)
	}
	for _, rp := range runaways {
		createRunawayPolicy(t, rp)
	}

	timeout := nodePoolWebhookTimeout(t)
	for _, rp := range runaways {
		t.Run(rp.name+" denies NodePools applied at once within the webhook timeout", func(t *testing.T) {
			var results []stormResult
			for range memoryStormWaves {
				results = append(results, applyAtOnce(ctx, rp.storm)...)
			}
			for _, r := range results {
				if r.err == nil {
					deleteNodePool(t, r.name)
					t.Errorf("NodePool %s was admitted in %s despite the Deny policy %s", r.name, r.took, rp.name)
					continue
				}
				msg := r.err.Error()
				if r.took >= timeout {
					t.Errorf("NodePool %s was answered after %s, past the webhook timeout of %s: %s", r.name, r.took, timeout, msg)
				}
				for _, want := range append([]string{"[" + rp.name + "] policy evaluation failed: "}, rp.cause...) {
					if !strings.Contains(msg, want) {
						t.Errorf("the denial of NodePool %s lacks %q:\n%s", r.name, want, msg)
					}
				}
				t.Logf("NodePool %s denied in %s: %s", r.name, r.took.Round(time.Millisecond), firstLine(msg, 220))
			}
		})
	}

	t.Run("the audit records the same failures", func(t *testing.T) {
		for _, rp := range runaways {
			audited := "e2e-memory-audited-" + rp.storm
			var last []joinerv1alpha1.AuditViolation
			waitFor(t, 20*time.Second, "the audit of "+audited+" against "+rp.name, func(ctx context.Context) (bool, error) {
				pp := &joinerv1alpha1.ProvisioningPolicy{}
				if err := c.Get(ctx, types.NamespacedName{Name: rp.name}, pp); err != nil {
					return false, nil
				}
				last = pp.Status.Violations
				return slices.ContainsFunc(pp.Status.Violations, func(v joinerv1alpha1.AuditViolation) bool {
					return v.Kind == "NodePool" && v.Name == audited && strings.HasPrefix(v.Message, "evaluation error: ")
				}), nil
			})
			for _, v := range last {
				if v.Name != audited {
					continue
				}
				for _, want := range rp.cause {
					if !strings.Contains(v.Message, want) {
						t.Errorf("the audit's record of %s against %s lacks %q: %s", audited, rp.name, want, v.Message)
					}
				}
			}
		}
	})

	t.Run("Joiner keeps serving", func(t *testing.T) {
		const harmless = "e2e-memory-harmless"
		manifest := fmt.Sprintf(`apiVersion: karpenter.sh/v1
kind: NodePool
metadata:
  name: %s
  labels: {joiner.dev/team: team-a}
spec:
  limits: {cpu: "10"}
  template:
    spec:
      nodeClassRef: {group: joiner.dev, kind: LocalNodeClass, name: %s}
      requirements:
        - {key: kubernetes.io/arch, operator: In, values: [amd64]}
`, harmless, framework.NodeClassName)
		deleteNodePool(t, harmless)
		out, err := kubectlRun(t, manifest, "apply", "-f", "-")
		if err != nil || !strings.Contains(out, "nodepool.karpenter.sh/"+harmless+" created") {
			t.Errorf("a NodePool the runaway policies do not apply to was not admitted (err %v):\n%s", err, out)
		}
		resp, err := http.Get("http://" + cluster.Joiner.ProbeAddr + "/readyz")
		if err != nil {
			t.Fatalf("Joiner's readiness probe: %v", err)
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Errorf("Joiner's readiness probe answered %s, want 200 OK", resp.Status)
		}
	})

	// The budget bounds what evaluations hold: the live heap. The heap also holds the garbage of stopped
	// evaluations until the next collection, which the collector lets grow to GOGC percent of the live
	// heap; the Go memory limit of the shipped container makes it collect sooner, so that must hold too.
	p := heap.stop()
	if p.samples == 0 {
		t.Fatal("the heap was never sampled")
	}
	liveBound := p.baseline + uint64(policy.DefaultMemoryBudget) + liveHeapMargin
	heapBound := liveBound + liveBound*p.gogc/100
	goLimit := uint64(shippedMemoryLimit) * operator.MemoryLimitPercent / 100
	t.Logf("Joiner's heap over %d samples every %s: %s live at the start; live peak %s (bound %s: start + budget %s + margin %s); "+
		"peak with uncollected garbage %s (bound %s at GOGC=%d; Go memory limit of the shipped %s container %s)",
		p.samples, heapSampleInterval, mib(p.baseline), mib(p.live), mib(liveBound), mib(uint64(policy.DefaultMemoryBudget)), mib(liveHeapMargin),
		mib(p.objects), mib(heapBound), p.gogc, mib(shippedMemoryLimit), mib(goLimit))
	if p.live > liveBound {
		t.Errorf("Joiner's live heap peaked at %s, over its size at the start plus the policy memory budget and a margin (%s): "+
			"stopped evaluations did not keep the heap within the budget", mib(p.live), mib(liveBound))
	}
	if p.objects > heapBound {
		t.Errorf("Joiner's heap peaked at %s with uncollected garbage, over what GOGC=%d allows above the live bound (%s)", mib(p.objects), p.gogc, mib(heapBound))
	}
	if p.objects > goLimit {
		t.Errorf("Joiner's heap peaked at %s, over the Go memory limit of the shipped container (%s)", mib(p.objects), mib(goLimit))
	}
}

// memoryNodePool returns a NodePool that passes every other check of this package, labelled so that the
// runaway policy of storm applies to it.
func memoryNodePool(name, storm string) *karpv1.NodePool {
	return &karpv1.NodePool{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{memoryStormLabel: storm, "joiner.dev/team": "team-a"}},
		Spec: karpv1.NodePoolSpec{
			Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10")},
			Template: karpv1.NodeClaimTemplate{Spec: karpv1.NodeClaimTemplateSpec{
				NodeClassRef: &karpv1.NodeClassReference{Group: "joiner.dev", Kind: "LocalNodeClass", Name: framework.NodeClassName},
				Requirements: []karpv1.NodeSelectorRequirementWithMinValues{{Key: corev1.LabelArchStable, Operator: corev1.NodeSelectorOpIn, Values: []string{"amd64"}}},
			}},
		},
	}
}

// createRunawayPolicy creates rp, which the webhook must admit, waits until Joiner enforces it, and
// deletes it when the test ends, waiting until Joiner's engine has dropped it so that it cannot deny the
// NodePools of the tests that follow.
func createRunawayPolicy(t *testing.T, rp runawayPolicy) {
	t.Helper()
	pp := &joinerv1alpha1.ProvisioningPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: rp.name},
		Spec: joinerv1alpha1.ProvisioningPolicySpec{
			Rego:              rp.rego,
			EnforcementAction: joinerv1alpha1.EnforcementDeny,
			Match:             joinerv1alpha1.PolicyMatch{Kinds: []string{"NodePool"}},
			Parameters:        &apiextensionsv1.JSON{Raw: []byte(rp.params)},
		},
	}
	if err := c.Create(context.Background(), pp); err != nil {
		t.Fatalf("create ProvisioningPolicy %s, whose sizes come from its parameters: %v", rp.name, err)
	}
	t.Cleanup(func() {
		if err := c.Delete(context.Background(), pp); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete ProvisioningPolicy %s: %v", rp.name, err)
		}
		waitFor(t, 30*time.Second, "Joiner's engine to drop "+rp.name, func(context.Context) (bool, error) {
			return !slices.Contains(cluster.Joiner.Operator.Engine.PolicyNames(), rp.name), nil
		})
	})
	waitFor(t, 30*time.Second, "policy "+rp.name+" Ready", func(ctx context.Context) (bool, error) {
		got := &joinerv1alpha1.ProvisioningPolicy{}
		if err := c.Get(ctx, types.NamespacedName{Name: rp.name}, got); err != nil {
			return false, nil
		}
		return meta.IsStatusConditionTrue(got.Status.Conditions, joinerv1alpha1.ConditionReady) && got.Status.CompiledGeneration == got.Generation, nil
	})
}

// nodePoolWebhookTimeout returns the timeout the apiserver gives Joiner's NodePool validation webhook.
func nodePoolWebhookTimeout(t *testing.T) time.Duration {
	t.Helper()
	cfg := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	if err := c.Get(context.Background(), types.NamespacedName{Name: operator.ValidatingValidation}, cfg); err != nil {
		t.Fatalf("get ValidatingWebhookConfiguration %s: %v", operator.ValidatingValidation, err)
	}
	for _, w := range cfg.Webhooks {
		if w.ClientConfig.URL != nil && strings.HasSuffix(*w.ClientConfig.URL, "/validate/nodepool") && w.TimeoutSeconds != nil {
			return time.Duration(*w.TimeoutSeconds) * time.Second
		}
	}
	t.Fatalf("ValidatingWebhookConfiguration %s has no NodePool webhook with a timeout", operator.ValidatingValidation)
	return 0
}

// stormResult is the answer to one NodePool create of a storm.
type stormResult struct {
	name string
	err  error
	took time.Duration
}

// applyAtOnce creates memoryStormSize NodePools labelled for storm at the same moment and returns each
// answer with how long it took.
func applyAtOnce(ctx context.Context, storm string) []stormResult {
	results := make([]stormResult, memoryStormSize)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range results {
		name := fmt.Sprintf("e2e-memory-%s-%d", storm, i)
		wg.Go(func() {
			np := memoryNodePool(name, storm)
			<-start
			began := time.Now()
			err := c.Create(ctx, np)
			results[i] = stormResult{name: name, err: err, took: time.Since(began)}
		})
	}
	close(start)
	wg.Wait()
	return results
}

// heapSampler reads the heap of this process, where Joiner runs, every heapSampleInterval and keeps the
// peaks, from the runtime/metrics values the policy engine's memory budget is enforced on.
type heapSampler struct {
	done    chan struct{}
	stopped sync.WaitGroup
	once    sync.Once
	// peaks is written by the sampling goroutine only, and read once it has ended.
	peaks heapPeaks
}

// heapPeaks is what a heapSampler found.
type heapPeaks struct {
	// baseline is the live heap when sampling started, just after a collection.
	baseline uint64
	// live is the largest live heap a collection found while sampling (/gc/heap/live:bytes).
	live uint64
	// objects is the largest heap read, live or garbage not yet swept (/memory/classes/heap/objects:bytes).
	objects uint64
	// gogc is the collector's GOGC percent.
	gogc uint64
	// samples is how many times the heap was read.
	samples int64
}

// Names of the runtime/metrics values the sampler reads.
const (
	heapObjectsMetric = "/memory/classes/heap/objects:bytes"
	heapLiveMetric    = "/gc/heap/live:bytes"
	gogcMetric        = "/gc/gogc:percent"
)

// startHeapSampler collects garbage, records the live heap as the baseline and starts sampling.
func startHeapSampler() *heapSampler {
	runtime.GC()
	read := readMetrics(heapObjectsMetric, heapLiveMetric, gogcMetric)
	h := &heapSampler{done: make(chan struct{}),
		peaks: heapPeaks{baseline: read[heapLiveMetric], live: read[heapLiveMetric], objects: read[heapObjectsMetric], gogc: read[gogcMetric]}}
	h.stopped.Go(func() {
		tick := time.NewTicker(heapSampleInterval)
		defer tick.Stop()
		for {
			select {
			case <-h.done:
				return
			case <-tick.C:
			}
			read := readMetrics(heapObjectsMetric, heapLiveMetric)
			h.peaks.objects = max(h.peaks.objects, read[heapObjectsMetric])
			h.peaks.live = max(h.peaks.live, read[heapLiveMetric])
			h.peaks.samples++
		}
	})
	return h
}

// stop ends the sampling (once; later calls only read) and returns the peaks.
func (h *heapSampler) stop() heapPeaks {
	h.once.Do(func() {
		close(h.done)
		h.stopped.Wait()
	})
	return h.peaks
}

// readMetrics reads the named runtime/metrics values, all of kind uint64.
func readMetrics(names ...string) map[string]uint64 {
	samples := make([]metrics.Sample, len(names))
	for i, n := range names {
		samples[i].Name = n
	}
	metrics.Read(samples)
	values := make(map[string]uint64, len(samples))
	for _, s := range samples {
		if s.Value.Kind() == metrics.KindUint64 {
			values[s.Name] = s.Value.Uint64()
		}
	}
	return values
}

// mib formats n bytes in MiB.
func mib(n uint64) string { return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20)) }

// firstLine returns the first line of s, cut to at most n bytes.
func firstLine(s string, n int) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}
