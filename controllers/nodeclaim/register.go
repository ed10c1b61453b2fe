package nodeclaim

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/joiner-dev/joiner/cloudprovider"
	"github.com/joiner-dev/joiner/controllers/nodeclaim/garbagecollection"
	"github.com/joiner-dev/joiner/controllers/nodepool"
	"github.com/joiner-dev/joiner/controllers/termination"
)

// Dependencies are what Register needs to wire the NodeClaim lifecycle, garbage collection,
// NodePool status and termination controllers. Zero-valued options mean each package's defaults.
type Dependencies struct {
	// CloudProvider launches, finds, lists and terminates instances. Required.
	CloudProvider cloudprovider.CloudProvider
	// Clock is injected into every controller; nil means the real clock.
	Clock clock.Clock
	// Registerer receives the controllers' Prometheus metrics (typically controller-runtime's
	// metrics.Registry); nil registers none.
	Registerer prometheus.Registerer
	// Lifecycle tunes the lifecycle controller (registration and launch TTLs).
	Lifecycle Options
	// Termination tunes termination (poll interval).
	Termination termination.Options
	// GarbageCollection tunes garbage collection (interval, grace period).
	GarbageCollection garbagecollection.Options
	// NodePool tunes the NodePool status controller (node class kinds, resync period).
	NodePool nodepool.Options
}

// Register adds the NodeClaim lifecycle controller, the termination controllers (NodeClaims and
// Nodes), garbage collection and the NodePool status controller to mgr, with the provider-ID
// field indexes they share. All of them run on the leader only (controller-runtime's default for
// controllers; garbage collection says so itself).
func Register(mgr ctrl.Manager, deps Dependencies) error {
	if deps.CloudProvider == nil {
		return fmt.Errorf("register nodeclaim controllers: a CloudProvider is required")
	}
	lifecycle, err := NewController(mgr.GetClient(), deps.CloudProvider, deps.Clock, mgr.GetEventRecorder(ControllerName), deps.Registerer, deps.Lifecycle)
	if err != nil {
		return fmt.Errorf("register nodeclaim controllers: %w", err)
	}
	if err := lifecycle.SetupWithManager(mgr); err != nil {
		return err
	}
	term, err := termination.NewController(mgr.GetClient(), mgr.GetAPIReader(), deps.CloudProvider, deps.Clock,
		mgr.GetEventRecorder(termination.NodeClaimControllerName), deps.Registerer, deps.Termination)
	if err != nil {
		return fmt.Errorf("register nodeclaim controllers: %w", err)
	}
	if err := term.SetupWithManager(mgr); err != nil {
		return err
	}
	gc, err := garbagecollection.NewController(mgr.GetClient(), mgr.GetAPIReader(), deps.CloudProvider, deps.Clock,
		mgr.GetEventRecorder(garbagecollection.ControllerName), deps.Registerer, deps.GarbageCollection)
	if err != nil {
		return fmt.Errorf("register nodeclaim controllers: %w", err)
	}
	if err := gc.SetupWithManager(mgr); err != nil {
		return err
	}
	return nodepool.NewController(mgr.GetClient(), mgr.GetRESTMapper(), deps.Clock, deps.NodePool).SetupWithManager(mgr)
}
