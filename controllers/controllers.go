// Package controllers is the one place that wires Joiner's controllers into a manager: the
// NodeClaim lifecycle, termination, garbage collection and NodePool status (the node lifecycle),
// the provisioner, disruption, drift, expiration, static NodePools, the pod metrics, policy sync and the audit, and the controllers the cloud
// provider brings. The
// behaviour lives in the subpackages; this package only constructs them from one Dependencies
// value and registers them. It must not hold controller logic of its own.
package controllers

import (
	"errors"
	"fmt"
	"net/http"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	joinerv1alpha1 "github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
	"github.com/joiner-dev/joiner/cloudprovider"
	cpmetrics "github.com/joiner-dev/joiner/cloudprovider/metrics"
	"github.com/joiner-dev/joiner/controllers/audit"
	"github.com/joiner-dev/joiner/controllers/capacitybuffer"
	"github.com/joiner-dev/joiner/controllers/consolidatable"
	"github.com/joiner-dev/joiner/controllers/disruption"
	"github.com/joiner-dev/joiner/controllers/drift"
	"github.com/joiner-dev/joiner/controllers/expiration"
	"github.com/joiner-dev/joiner/controllers/garbagecollection"
	"github.com/joiner-dev/joiner/controllers/nodeclaim"
	"github.com/joiner-dev/joiner/controllers/nodepool"
	"github.com/joiner-dev/joiner/controllers/nodepoolhash"
	"github.com/joiner-dev/joiner/controllers/noderepair"
	"github.com/joiner-dev/joiner/controllers/podevents"
	"github.com/joiner-dev/joiner/controllers/podmetrics"
	"github.com/joiner-dev/joiner/controllers/policysync"
	"github.com/joiner-dev/joiner/controllers/provisioning"
	"github.com/joiner-dev/joiner/controllers/staticpool"
	"github.com/joiner-dev/joiner/controllers/termination"
	"github.com/joiner-dev/joiner/policy"
)

// Options tune the controllers. Zero values mean each package's documented defaults.
type Options struct {
	// Lifecycle tunes the NodeClaim lifecycle controller (launch and registration TTLs).
	Lifecycle nodeclaim.Options
	// Termination tunes termination (poll interval, concurrency).
	Termination termination.Options
	// GarbageCollection tunes garbage collection (interval, grace period).
	GarbageCollection garbagecollection.Options
	// NodePool tunes the NodePool status controller (node class kinds, resync period).
	NodePool nodepool.Options
	// Provisioning tunes the provisioner (batching, scheduling simulation).
	Provisioning provisioning.Options
	// Expiration tunes expiry (the default grace of graceful expiration).
	Expiration expiration.Options
	// Disruption tunes consolidation (polling, validation, timeouts, churn guard); its
	// Scheduling options are always the provisioner's.
	Disruption disruption.Options
	// AuditInterval is the period of the audit (zero means audit.DefaultInterval).
	AuditInterval time.Duration
	// DisableStaticCapacity leaves static NodePools (spec.replicas) unmanaged: no static pool
	// controller runs, as with Karpenter's StaticCapacity feature gate off. The provisioner and
	// consolidation ignore static NodePools either way.
	DisableStaticCapacity bool
	// DisableClusterStateObservability turns off the metrics that describe the cluster rather than
	// Joiner's own work (karpenter_pods_state, the pod metrics controller), as Karpenter's
	// disableClusterStateObservability setting does.
	DisableClusterStateObservability bool
	// NodeRepair runs node repair (Karpenter's NodeRepair feature gate): NodeClaims whose Nodes
	// stay unhealthy past the provider's RepairPolicies are replaced. Off by default.
	NodeRepair bool
	// Repair tunes node repair (tests shorten its tolerations).
	Repair noderepair.Options
	// CapacityBuffer runs the CapacityBuffer controller and makes the provisioner keep the
	// buffers' room free (Karpenter's CapacityBuffer feature gate). Off by default.
	CapacityBuffer bool
	// PlanForExpectedPods makes the provisioner plan, and consolidation keep, capacity for the pods
	// ReplicaSets, StatefulSets and Jobs are still to create (Joiner's own PlanForExpectedPods
	// gate; package expectedpods). Off by default.
	PlanForExpectedPods bool
}

// Dependencies are what the controllers are built from.
type Dependencies struct {
	// CloudProvider launches, finds, lists and terminates instances. Required.
	CloudProvider cloudprovider.CloudProvider
	// ProviderControllers are the controllers the provider owns (its node class's status, ...);
	// those that are cloudprovider.InstrumentedController register their metrics with Registerer.
	ProviderControllers []cloudprovider.Controller
	// Engine is the policy engine that policy sync compiles into and the audit evaluates with.
	// Required by Register; RegisterNodeLifecycle does not use it.
	Engine *policy.Engine
	// Clock is injected into every controller; nil means the real clock.
	Clock clock.Clock
	// Registerer receives the controllers' Prometheus metrics (the operator passes
	// controller-runtime's metrics.Registry); nil registers none.
	Registerer prometheus.Registerer
	// Log is the root logger; each controller gets a named child.
	Log logr.Logger
	// Options tune the controllers.
	Options Options
}

// Register wires every controller Joiner runs into mgr: the node lifecycle (RegisterNodeLifecycle),
// the provisioner, disruption, drift, expiration, static NodePools, the pod metrics, policy sync with the inventory mirrors, the audit, and the
// provider's own controllers. It also adds the "policies" readiness check, which holds until
// every policy is compiled.
func Register(mgr ctrl.Manager, deps Dependencies) error {
	if deps.Engine == nil {
		return errors.New("register controllers: a policy engine is required")
	}
	if err := RegisterNodeLifecycle(mgr, deps); err != nil {
		return err
	}
	deps = deps.withDefaults()
	for _, c := range deps.ProviderControllers {
		if ic, ok := c.(cloudprovider.InstrumentedController); ok {
			if err := ic.RegisterMetrics(deps.Registerer); err != nil {
				return fmt.Errorf("register the cloud provider's controllers: %w", err)
			}
		}
		if err := c.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("register the cloud provider's controllers: %w", err)
		}
	}
	popts := deps.Options.Provisioning
	popts.CapacityBuffer = deps.Options.CapacityBuffer
	popts.PlanForExpectedPods = deps.Options.PlanForExpectedPods
	p, err := provisioning.New(mgr.GetClient(), cpmetrics.ForController(deps.CloudProvider, provisioning.MetricsControllerName),
		mgr.GetEventRecorder(provisioning.ControllerName), deps.Clock, deps.Log.WithName("provisioner"), deps.Registerer, popts)
	if err != nil {
		return fmt.Errorf("register the provisioner: %w", err)
	}
	if err := p.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("register the provisioner: %w", err)
	}
	dopts := deps.Options.Disruption
	dopts.Scheduling = deps.Options.Provisioning.Scheduling
	dopts.CapacityBuffer = deps.Options.CapacityBuffer
	dopts.PlanForExpectedPods = deps.Options.PlanForExpectedPods
	dc, err := disruption.NewController(mgr.GetClient(), mgr.GetAPIReader(), cpmetrics.ForController(deps.CloudProvider, disruption.ControllerName),
		deps.Clock, mgr.GetEventRecorder(disruption.ControllerName), deps.Log.WithName("disruption"), deps.Registerer, dopts)
	if err != nil {
		return fmt.Errorf("register disruption: %w", err)
	}
	if err := dc.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("register disruption: %w", err)
	}
	// Consolidation reads the Consolidatable condition, which pod events keep honest.
	if err := podevents.NewController(mgr.GetClient(), deps.Clock, podevents.Options{}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("register pod events: %w", err)
	}
	if err := consolidatable.NewController(mgr.GetClient(), deps.Clock, consolidatable.Options{}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("register the Consolidatable condition: %w", err)
	}
	// Drift: the NodePool template hash, and the Drifted condition disruption replaces nodes by.
	if err := nodepoolhash.NewController(mgr.GetClient(), nodepoolhash.Options{}).SetupWithManager(mgr); err != nil {
		return fmt.Errorf("register the NodePool hash: %w", err)
	}
	dr, err := drift.NewController(mgr.GetClient(), cpmetrics.ForController(deps.CloudProvider, drift.ControllerName), deps.Clock, deps.Registerer, drift.Options{})
	if err != nil {
		return fmt.Errorf("register drift: %w", err)
	}
	if err := dr.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("register drift: %w", err)
	}
	exp, err := expiration.NewController(mgr.GetClient(), deps.Clock, mgr.GetEventRecorder(expiration.ControllerName), deps.Registerer, deps.Options.Expiration)
	if err != nil {
		return fmt.Errorf("register expiration: %w", err)
	}
	if err := exp.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("register expiration: %w", err)
	}
	if err := registerOptional(mgr, deps); err != nil {
		return err
	}
	return registerPolicy(mgr, deps)
}

// registerOptional wires the controllers that options can turn off: static NodePools
// (DisableStaticCapacity), CapacityBuffers (CapacityBuffer), node repair (NodeRepair) and the pod metrics
// (DisableClusterStateObservability).
func registerOptional(mgr ctrl.Manager, deps Dependencies) error {
	if !deps.Options.DisableStaticCapacity {
		static, err := staticpool.NewController(mgr.GetClient(), deps.Clock, mgr.GetEventRecorder(staticpool.ControllerName), deps.Registerer, staticpool.Options{})
		if err != nil {
			return fmt.Errorf("register static NodePools: %w", err)
		}
		if err := static.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("register static NodePools: %w", err)
		}
	}
	if deps.Options.CapacityBuffer {
		if err := capacitybuffer.NewController(mgr.GetClient(), deps.Clock).SetupWithManager(mgr); err != nil {
			return fmt.Errorf("register CapacityBuffers: %w", err)
		}
	}
	if err := registerNodeRepair(mgr, deps); err != nil {
		return err
	}
	if !deps.Options.DisableClusterStateObservability {
		pods, err := podmetrics.NewController(mgr.GetClient(), deps.Registerer)
		if err != nil {
			return fmt.Errorf("register pod metrics: %w", err)
		}
		if err := pods.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("register pod metrics: %w", err)
		}
	}
	return nil
}

// registerNodeRepair wires node repair when the NodeRepair gate is on and the provider declares
// repair policies (as Karpenter: a provider without them repairs nothing).
func registerNodeRepair(mgr ctrl.Manager, deps Dependencies) error {
	if !deps.Options.NodeRepair || len(deps.CloudProvider.RepairPolicies()) == 0 {
		return nil
	}
	repair, err := noderepair.NewController(mgr.GetClient(), deps.CloudProvider, deps.Clock, mgr.GetEventRecorder(noderepair.ControllerName),
		deps.Registerer, deps.Options.Repair)
	if err != nil {
		return fmt.Errorf("register node repair: %w", err)
	}
	if err := repair.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("register node repair: %w", err)
	}
	return nil
}

// RegisterNodeLifecycle wires the controllers that take a NodeClaim from creation to deletion:
// the lifecycle controller, termination (NodeClaims and Nodes), garbage collection and NodePool
// status (each registers the provider-ID field indexes they share). Register calls it; tests of those
// controllers call it alone. All of them run on the leader only.
func RegisterNodeLifecycle(mgr ctrl.Manager, deps Dependencies) error {
	if deps.CloudProvider == nil {
		return errors.New("register controllers: a cloud provider is required")
	}
	deps = deps.withDefaults()
	// A provider decorated with metrics (package cloudprovider/metrics) gives each controller a
	// view that names it in the controller label.
	lifecycle, err := nodeclaim.NewController(mgr.GetClient(), cpmetrics.ForController(deps.CloudProvider, nodeclaim.ControllerName), deps.Clock,
		mgr.GetEventRecorder(nodeclaim.ControllerName), deps.Registerer, deps.Options.Lifecycle)
	if err != nil {
		return fmt.Errorf("register controllers: %w", err)
	}
	term, err := termination.NewController(mgr.GetClient(), mgr.GetAPIReader(), cpmetrics.ForController(deps.CloudProvider, termination.NodeClaimControllerName), deps.Clock,
		mgr.GetEventRecorder(termination.NodeClaimControllerName), deps.Registerer, deps.Options.Termination)
	if err != nil {
		return fmt.Errorf("register controllers: %w", err)
	}
	gc, err := garbagecollection.NewController(mgr.GetClient(), mgr.GetAPIReader(), cpmetrics.ForController(deps.CloudProvider, garbagecollection.ControllerName), deps.Clock,
		mgr.GetEventRecorder(garbagecollection.ControllerName), deps.Registerer, deps.Options.GarbageCollection)
	if err != nil {
		return fmt.Errorf("register controllers: %w", err)
	}
	status, err := nodepool.NewController(mgr.GetClient(), mgr.GetRESTMapper(), deps.Clock, deps.Registerer, deps.Options.NodePool)
	if err != nil {
		return fmt.Errorf("register controllers: %w", err)
	}
	for _, c := range []cloudprovider.Controller{lifecycle, term, gc, status} {
		if err := c.SetupWithManager(mgr); err != nil {
			return err
		}
	}
	return nil
}

// registerPolicy wires policy sync (every replica compiles policies, because every replica
// serves the webhooks), the inventory mirrors of NodePools and node classes, and the leader-only
// audit, which policy changes trigger.
func registerPolicy(mgr ctrl.Manager, deps Dependencies) error {
	metrics, err := audit.NewMetrics(deps.Registerer)
	if err != nil {
		return fmt.Errorf("register the audit: %w", err)
	}
	auditor := &audit.Auditor{
		Client: mgr.GetClient(), Engine: deps.Engine, Recorder: mgr.GetEventRecorder(audit.ControllerName),
		Interval: deps.Options.AuditInterval, Clock: deps.Clock, Log: deps.Log.WithName("audit"), Metric: metrics,
	}
	if err := mgr.Add(auditor); err != nil {
		return fmt.Errorf("register the audit: %w", err)
	}
	pr := &policysync.PolicyReconciler{Client: mgr.GetClient(), Engine: deps.Engine,
		Recorder: mgr.GetEventRecorder(policysync.ControllerName), OnChange: auditor.Trigger}
	if err := pr.SetupWithManager(mgr); err != nil {
		return fmt.Errorf("register policy sync: %w", err)
	}
	for _, obj := range []client.Object{&karpv1.NodePool{}, &awsv1.EC2NodeClass{}, &joinerv1alpha1.LocalNodeClass{}} {
		ir := &policysync.InventoryReconciler{Client: mgr.GetClient(), Engine: deps.Engine, Object: obj}
		if err := ir.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("register policy inventory: %w", err)
		}
	}
	if err := mgr.AddReadyzCheck("policies", func(req *http.Request) error {
		return pr.Synced(req.Context(), mgr.GetClient())
	}); err != nil {
		return fmt.Errorf("add the policies readiness check: %w", err)
	}
	return nil
}

func (d Dependencies) withDefaults() Dependencies {
	if d.Clock == nil {
		d.Clock = clock.RealClock{}
	}
	if d.Log.GetSink() == nil {
		d.Log = logr.Discard()
	}
	return d
}
