// Package operator assembles Joiner's controller manager: the webhook server with its managed
// certificate, the policy engine and the controllers that keep it in step, the audit, health and
// readiness checks, metrics and leader election. It wires; the behaviour lives in the packages it
// wires together.
package operator

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	cmmeta "github.com/cert-manager/cert-manager/pkg/apis/meta/v1"
	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"

	apischeme "github.com/joiner-dev/joiner/api/scheme"
	"github.com/joiner-dev/joiner/certs"
	"github.com/joiner-dev/joiner/cloudprovider"
	cpmetrics "github.com/joiner-dev/joiner/cloudprovider/metrics"
	"github.com/joiner-dev/joiner/controllers"
	"github.com/joiner-dev/joiner/policy"
	"github.com/joiner-dev/joiner/webhooks"
	"github.com/joiner-dev/joiner/webhooks/admissioncatalog"
)

// Certificate modes.
const (
	CertModeSelfManaged = "self-managed"
	CertModeCertManager = "cert-manager"
)

// Client rate limits used when the rest.Config sets none.
const (
	DefaultQPS   = 200
	DefaultBurst = 300
)

// Names of Joiner's own objects, shared by the manifests in config/ and the chart.
const (
	DefaultNamespace                   = "joiner-system"
	DefaultServiceName                 = "joiner-webhook"
	DefaultSecretName                  = "joiner-webhook-cert"
	LeaderElectionID                   = "joiner"
	MutatingDefaulting                 = "joiner-defaulting"
	ValidatingValidation               = "joiner-validation"
	PodTenancyWebhookConfigurationName = "joiner-pod-tenancy"
)

// Options configure the operator. Zero values mean the documented defaults.
type Options struct {
	// Namespace Joiner runs in: its Secret, leader-election Lease and Service live there.
	Namespace string
	// ServiceName is the webhook Service; its DNS names go into the serving certificate.
	ServiceName string
	// SecretName holds the webhook serving certificate.
	SecretName string
	// WebhookHost and WebhookPort are where the webhook server listens (default :9443).
	WebhookHost string
	WebhookPort int
	// WebhookIPs are extra IP SANs of the serving certificate (127.0.0.1 for a local run).
	WebhookIPs []net.IP
	// MetricsAddr and ProbeAddr are the metrics and health probe listen addresses; "0" disables them.
	MetricsAddr string
	ProbeAddr   string
	// LeaderElect turns on leader election for the leader-only controllers (audit, provisioning).
	LeaderElect bool
	// LeaseDuration, RenewDeadline and RetryPeriod time leader election (zero means
	// DefaultLeaseDuration, DefaultRenewDeadline and DefaultRetryPeriod): the leader renews its Lease
	// every RetryPeriod and stops leading when it could not renew for RenewDeadline; a follower
	// takes over a Lease nobody renewed for LeaseDuration.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// LeaderElectionIdentity is the holder identity this replica writes into the Lease; empty means
	// a new NewLeaderElectionIdentity (Run keeps one identity across its managers).
	LeaderElectionIdentity string
	// CertMode is CertModeSelfManaged (default) or CertModeCertManager.
	CertMode string
	// CertManagerIssuer names an existing issuer as "Issuer/name" or "ClusterIssuer/name"; empty
	// creates Joiner's own self-signed chain.
	CertManagerIssuer string
	// TLSMinVersion is the lowest TLS version the webhook accepts (default TLS 1.2).
	TLSMinVersion uint16
	// CertLifetimes override the certificate lifetimes (tests use short ones).
	CertLifetimes CertLifetimes
	// GracefulShutdown bounds how long runnables get to stop (default 30s).
	GracefulShutdown time.Duration
	// CloudProvider builds the cloud provider (and the controllers it owns) once the manager
	// exists. Required: the binaries choose it from their flags.
	CloudProvider cloudprovider.Factory
	// Controllers tune the controllers (TTLs, intervals, batching).
	Controllers controllers.Options
	// PolicyMemoryBudget bounds, in bytes, how much the heap may grow while the policy engine evaluates
	// the policies of one review (policy.Options.MemoryBudget): a policy still running when it grows
	// past it fails, which denies for a Deny policy. Zero means policy.DefaultMemoryBudget; a negative
	// value disables the budget.
	PolicyMemoryBudget int64
	// Registerer receives every metric the operator declares; nil means controller-runtime's
	// metrics.Registry, which the metrics endpoint serves.
	Registerer prometheus.Registerer
	// BuildInfo is reported as joiner_build_info (cmd/joiner passes its -ldflags stamps).
	BuildInfo BuildInfo
	// Clock is injected into every controller; nil means the real clock.
	Clock clock.Clock
	// Log is the root logger.
	Log logr.Logger
	// SkipControllerNameValidation lets one process build the operator more than once
	// (controller-runtime refuses a second controller of the same name otherwise): for tests that
	// restart Joiner in process.
	SkipControllerNameValidation bool
}

// CertLifetimes are the self-managed certificate lifetimes; zero means the certs package defaults.
type CertLifetimes struct {
	CAValidity, CARenewBefore, LeafValidity, LeafRenewBefore, PropagationDelay time.Duration
}

func (o Options) withDefaults() (Options, error) {
	if o.Namespace == "" {
		o.Namespace = DefaultNamespace
	}
	if o.ServiceName == "" {
		o.ServiceName = DefaultServiceName
	}
	if o.SecretName == "" {
		o.SecretName = DefaultSecretName
	}
	if o.WebhookPort == 0 {
		o.WebhookPort = 9443
	}
	if o.CertMode == "" {
		o.CertMode = CertModeSelfManaged
	}
	if o.CertMode != CertModeSelfManaged && o.CertMode != CertModeCertManager {
		return o, fmt.Errorf("--cert-mode %q is not supported; use %s or %s", o.CertMode, CertModeSelfManaged, CertModeCertManager)
	}
	if o.TLSMinVersion == 0 {
		o.TLSMinVersion = tls.VersionTLS12
	}
	if o.GracefulShutdown == 0 {
		o.GracefulShutdown = 30 * time.Second
	}
	if err := o.leaderElectionDefaults(); err != nil {
		return o, err
	}
	if o.Log.GetSink() == nil {
		o.Log = logr.Discard()
	}
	if o.CloudProvider == nil {
		return o, errors.New("a cloud provider is required (Options.CloudProvider)")
	}
	if o.Registerer == nil {
		o.Registerer = metrics.Registry
	}
	return o, nil
}

// Operator is an assembled, not yet started, manager.
type Operator struct {
	Manager manager.Manager
	Engine  *policy.Engine
	// CloudProvider launches the instances behind NodeClaims.
	CloudProvider cloudprovider.CloudProvider
	opts          Options
	// stopProvider ends the provider's background work once the manager has stopped.
	stopProvider context.CancelFunc
	// registrar is Manager with the leader-only runnables tracked in leaderWork and the webhooks
	// behind the readiness checks; the packages that register runnables, checks and webhooks get it.
	registrar  trackingManager
	leaderWork *leaderWork
	metrics    *termRegisterer
}

// New assembles the manager for cfg.
func New(cfg *rest.Config, opts Options) (*Operator, error) {
	opts, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	if err := registerBuildInfo(opts.Registerer, opts.BuildInfo); err != nil {
		return nil, err
	}
	scheme, err := apischeme.New()
	if err != nil {
		return nil, err
	}
	if opts.CertMode == CertModeCertManager {
		if err := certs.RegisterCertManagerTypes(scheme); err != nil {
			return nil, fmt.Errorf("register cert-manager types: %w", err)
		}
	}
	serving := certs.NewServingCert()
	cfg = rest.CopyConfig(cfg)
	if cfg.QPS == 0 {
		// client-go's default of 5 requests per second serialises a scale-up of tens of nodes.
		cfg.QPS, cfg.Burst = DefaultQPS, DefaultBurst
	}
	// The manager's metrics are this term's (Run unregisters them when the term ends).
	metricsOfTerm := &termRegisterer{Registerer: opts.Registerer}
	opts.Registerer = metricsOfTerm
	work := newLeaderWork(opts.RenewDeadline, clock.RealClock{})
	mgr, err := newManager(cfg, opts, scheme, serving, work)
	if err != nil {
		return nil, err
	}
	engine := policy.New(policy.Options{Logger: opts.Log.WithName("policy"), MemoryBudget: opts.PolicyMemoryBudget})
	op := &Operator{Manager: mgr, opts: opts, Engine: engine, leaderWork: work, metrics: metricsOfTerm}
	op.registrar = trackingManager{Manager: mgr, work: work, gate: &readinessGate{}}
	if err := op.setupCerts(serving); err != nil {
		return nil, err
	}
	if err := op.setupControllers(); err != nil {
		op.stopProvider()
		return nil, err
	}
	if err := op.setupWebhooks(); err != nil {
		op.stopProvider()
		return nil, err
	}
	if err := addProbes(mgr, serving); err != nil {
		return nil, err
	}
	return op, nil
}

// newManager creates the controller-runtime manager: metrics, probes, the webhook server with the
// serving certificate, and leader election on a Lease lock that reports to the term's leaderWork.
func newManager(cfg *rest.Config, opts Options, scheme *runtime.Scheme, serving *certs.ServingCert, work *leaderWork) (manager.Manager, error) {
	var lock *resourcelock.LeaseLock
	if opts.LeaderElect {
		var err error
		if lock, err = newLeaseLock(cfg, opts); err != nil {
			return nil, err
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 scheme,
		Cache:                  cacheOptions(),
		Logger:                 opts.Log,
		Metrics:                metricsserver.Options{BindAddress: orDefault(opts.MetricsAddr, ":8080")},
		HealthProbeBindAddress: orDefault(opts.ProbeAddr, ":8081"),
		LeaderElection:         opts.LeaderElect,
		LeaderElectionID:       LeaderElectionID,
		// The lock carries the identity, which Run keeps across managers.
		LeaderElectionResourceLockInterface: lockInterface(lock, work),
		LeaderElectionNamespace:             opts.Namespace,
		LeaderElectionReleaseOnCancel:       true,
		LeaseDuration:                       &opts.LeaseDuration,
		RenewDeadline:                       &opts.RenewDeadline,
		RetryPeriod:                         &opts.RetryPeriod,
		GracefulShutdownTimeout:             &opts.GracefulShutdown,
		Controller:                          config.Controller{SkipNameValidation: &opts.SkipControllerNameValidation},
		WebhookServer: webhook.NewServer(webhook.Options{
			Host:    opts.WebhookHost,
			Port:    opts.WebhookPort,
			TLSOpts: serving.TLSOpts(certs.TLSOptions{MinVersion: opts.TLSMinVersion}),
		}),
	})
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}
	if lock != nil {
		// As controller-runtime's own lock: the core Events API ("<identity> became leader"), which
		// is what the ClusterRole grants the leader election's recorder.
		lock.LockConfig.EventRecorder = mgr.GetEventRecorderFor(opts.LeaderElectionIdentity) //nolint:staticcheck // client-go's lock takes a tools/record recorder
	}
	return mgr, nil
}

// addProbes adds the liveness check and the webhook server's readiness check.
func addProbes(mgr manager.Manager, serving *certs.ServingCert) error {
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return fmt.Errorf("add healthz: %w", err)
	}
	// Dial the webhook server only once it has a certificate, or the dial itself logs a TLS error.
	started := mgr.GetWebhookServer().StartedChecker()
	if err := mgr.AddReadyzCheck("webhook-server", func(req *http.Request) error {
		if !serving.Loaded() {
			return errors.New("webhook serving certificate not loaded yet")
		}
		return started(req)
	}); err != nil {
		return fmt.Errorf("add readyz: %w", err)
	}
	return nil
}

func (op *Operator) setupCerts(serving *certs.ServingCert) error {
	o := op.opts
	m, err := certs.NewMetrics(o.Registerer)
	if err != nil {
		return fmt.Errorf("certificate metrics: %w", err)
	}
	target := certs.Target{
		Namespace: o.Namespace, SecretName: o.SecretName, ServiceName: o.ServiceName, IPAddresses: o.WebhookIPs,
		MutatingWebhookConfigurations:   []string{MutatingDefaulting, PodTenancyWebhookConfigurationName},
		ValidatingWebhookConfigurations: []string{ValidatingValidation, PodTenancyWebhookConfigurationName},
		Log:                             o.Log.WithName("certs"), Metrics: m,
	}
	mgr := op.registrar
	switch o.CertMode {
	case CertModeCertManager:
		cmo := certs.CertManagerOptions{Target: target}
		if o.CertManagerIssuer != "" {
			ref, err := parseIssuer(o.CertManagerIssuer)
			if err != nil {
				return err
			}
			cmo.IssuerRef = ref
		}
		r, err := certs.NewCertManagerReconciler(mgr.GetClient(), mgr.GetAPIReader(), serving, cmo)
		if err != nil {
			return fmt.Errorf("cert-manager mode: %w", err)
		}
		if err := r.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("cert-manager mode: %w", err)
		}
		return mgr.AddReadyzCheck("certificate", r.ReadyzCheck())
	default:
		lt := o.CertLifetimes
		r, err := certs.NewRotator(mgr.GetClient(), mgr.GetAPIReader(), serving, certs.Options{
			Target:     target,
			CAValidity: lt.CAValidity, CARenewBefore: lt.CARenewBefore, LeafValidity: lt.LeafValidity,
			LeafRenewBefore: lt.LeafRenewBefore, PropagationDelay: lt.PropagationDelay,
		})
		if err != nil {
			return fmt.Errorf("self-managed certificates: %w", err)
		}
		if err := r.SetupWithManager(mgr); err != nil {
			return fmt.Errorf("self-managed certificates: %w", err)
		}
		return mgr.AddReadyzCheck("certificate", r.ReadyzCheck())
	}
}

// setupWebhooks registers the admission webhooks: defaulting and validation over the policy
// engine, and the Pod tenancy webhooks. Every replica serves them.
func (op *Operator) setupWebhooks() error {
	mgr := op.registrar
	return webhooks.Register(mgr.GetWebhookServer(), webhooks.Dependencies{
		Engine: op.Engine, Reader: mgr.GetClient(), Registerer: op.opts.Registerer,
		InstanceTypes:    admissioncatalog.Lister(op.CloudProvider),
		Logger:           op.opts.Log.WithName("webhooks"),
		ExemptNamespaces: append(webhooks.DefaultExemptNamespaces(), op.opts.Namespace),
		ExemptUsernames:  []string{"system:serviceaccount:" + op.opts.Namespace + ":joiner"},
	})
}

// setupControllers builds the cloud provider from its factory, decorates it with the cloud
// provider metrics, and hands it, with the policy engine, to the one place that wires the
// controllers (which gives each controller a view naming it in those metrics).
func (op *Operator) setupControllers() error {
	mgr := op.registrar
	ctx, cancel := context.WithCancel(context.Background())
	op.stopProvider = cancel
	provider, owned, err := op.opts.CloudProvider(ctx, mgr.GetClient())
	if err != nil {
		return fmt.Errorf("cloud provider: %w", err)
	}
	measured, err := cpmetrics.Decorate(provider, op.opts.Registerer)
	if err != nil {
		return fmt.Errorf("cloud provider: %w", err)
	}
	// The webhooks are the operator's own caller of the provider (they list instance types).
	op.CloudProvider = measured.For("webhooks")
	return controllers.Register(mgr, controllers.Dependencies{
		CloudProvider:       measured,
		ProviderControllers: owned,
		Engine:              op.Engine,
		Clock:               op.opts.Clock,
		Registerer:          op.opts.Registerer,
		Log:                 op.opts.Log,
		Options:             op.opts.Controllers,
	})
}

// Start runs the manager until ctx ends, then shuts down gracefully.
//
// With leader election, the term ends early when the Lease is lost: controller-runtime reports it,
// or the fence closes because the Lease went unrenewed for RenewDeadline (leaderWork). Start then
// waits until every leader-only runnable has returned (controller-runtime does not) and returns an
// error wrapping ErrLeadershipLost; when one is still running after GracefulShutdown, it returns
// an error that does not, and only exiting the process is safe.
func (op *Operator) Start(ctx context.Context) error {
	defer op.stopProvider()
	defer op.leaderWork.stop()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	defer context.AfterFunc(op.leaderWork.fenced, cancel)()
	err := op.Manager.Start(runCtx)
	lost := op.opts.LeaderElect && ctx.Err() == nil && (op.leaderWork.isFenced() || isLeadershipLost(err))
	if !lost {
		if err == nil || errors.Is(err, context.Canceled) {
			return nil
		}
		return fmt.Errorf("run manager: %w", err)
	}
	if err == nil || errors.Is(err, context.Canceled) {
		err = fmt.Errorf("the Lease went unrenewed for %s", op.opts.RenewDeadline)
	}
	if werr := op.leaderWork.wait(op.opts.GracefulShutdown); werr != nil {
		return fmt.Errorf("run manager: %w; %w", err, werr)
	}
	return fmt.Errorf("%w: %w", ErrLeadershipLost, err)
}

// lockInterface returns the Lease lock as the manager option takes it, reporting to the term's
// fence; nil, not a typed nil, without leader election.
func lockInterface(lock *resourcelock.LeaseLock, work *leaderWork) resourcelock.Interface {
	if lock == nil {
		return nil
	}
	return fencedLock{LeaseLock: lock, work: work}
}

func parseIssuer(s string) (*cmmeta.IssuerReference, error) {
	for _, kind := range []string{"Issuer", "ClusterIssuer"} {
		if len(s) > len(kind)+1 && s[:len(kind)+1] == kind+"/" {
			return &cmmeta.IssuerReference{Kind: kind, Name: s[len(kind)+1:], Group: "cert-manager.io"}, nil
		}
	}
	return nil, fmt.Errorf("--cert-manager-issuer %q: use Issuer/<name> or ClusterIssuer/<name>", s)
}

func orDefault(v, def string) string {
	if v == "" {
		return def
	}
	return v
}
