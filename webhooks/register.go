package webhooks

import (
	"errors"
	"fmt"
	"slices"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/joiner-dev/joiner/policy"
)

// Paths the handlers are served on.
const (
	PathDefaultNodePool            = "/default/nodepool"
	PathDefaultNodeClaim           = "/default/nodeclaim"
	PathDefaultEC2NodeClass        = "/default/ec2nodeclass"
	PathDefaultLocalNodeClass      = "/default/localnodeclass"
	PathValidateNodePool           = "/validate/nodepool"
	PathValidateNodeClaim          = "/validate/nodeclaim"
	PathValidateEC2NodeClass       = "/validate/ec2nodeclass"
	PathValidateLocalNodeClass     = "/validate/localnodeclass"
	PathValidateProvisioningPolicy = "/validate/provisioningpolicy"
	PathMutatePod                  = "/mutate/pod"
	PathValidatePod                = "/validate/pod"
	PathValidateWorkload           = "/validate/workload"
)

// Paths returns every path NewHandlers serves, in the order above.
func Paths() []string {
	return []string{
		PathDefaultNodePool, PathDefaultNodeClaim, PathDefaultEC2NodeClass, PathDefaultLocalNodeClass,
		PathValidateNodePool, PathValidateNodeClaim, PathValidateEC2NodeClass, PathValidateLocalNodeClass,
		PathValidateProvisioningPolicy, PathMutatePod, PathValidatePod, PathValidateWorkload,
	}
}

// ServiceAccountUsername is the username of Joiner's own service account (joiner in joiner-system). Its
// requests are admitted without validation by default.
const ServiceAccountUsername = "system:serviceaccount:joiner-system:joiner"

// DefaultExemptNamespaces returns the namespaces whose Pods the tenancy handlers never touch when
// Dependencies.ExemptNamespaces is nil.
func DefaultExemptNamespaces() []string {
	return []string{"kube-system", "kube-public", "kube-node-lease"}
}

// Dependencies are what the handlers need.
type Dependencies struct {
	// Engine evaluates ProvisioningPolicies. Required: the audit controller keeps its policies and
	// inventory up to date, and the handlers only read from it.
	Engine *policy.Engine
	// Reader reads node classes (nodeClassRef warnings), Namespaces and NodePools (Pod tenancy).
	// Required; the manager's cache-backed client is the intended one. It needs the Joiner and core
	// types in its scheme: NodePool, EC2NodeClass, LocalNodeClass and Namespace.
	Reader client.Reader
	// InstanceTypes lists the instance types a NodePool could launch, to deny requirements none of them
	// satisfies. Optional: nil skips that check.
	InstanceTypes InstanceTypeLister
	// Registerer receives the handlers' metrics (MetricPolicyViolations, MetricPolicyErrors). Optional:
	// nil keeps them unregistered. Pass controller-runtime's metrics.Registry to serve them with the
	// manager's.
	Registerer prometheus.Registerer
	// OnDryRun receives the violations of DryRun policies. Optional.
	OnDryRun DryRunHook
	// Logger receives dry-run violations and lookup failures. The zero value discards them.
	Logger logr.Logger
	// ExemptUsernames are admitted by the validating handlers without checks. Nil means
	// [ServiceAccountUsername]; an empty, non-nil slice exempts nobody.
	ExemptUsernames []string
	// ExemptNamespaces are namespaces whose Pods the tenancy handlers leave alone, bound or not. Nil
	// means DefaultExemptNamespaces.
	ExemptNamespaces []string
}

// NewHandlers returns every handler keyed by its path (see Paths). Each is a plain admission.Handler that
// can be called without a server, and a DecodedHandler for callers that hold the objects decoded.
func NewHandlers(deps Dependencies) (map[string]DecodedHandler, error) {
	if deps.Engine == nil {
		return nil, errors.New("webhooks: Dependencies.Engine is required; pass the policy engine the audit controller feeds")
	}
	if deps.Reader == nil {
		return nil, errors.New("webhooks: Dependencies.Reader is required; pass the manager's client (mgr.GetClient())")
	}
	log := deps.Logger
	if log.GetSink() == nil {
		log = logr.Discard()
	}
	m, err := newMetrics(deps.Registerer)
	if err != nil {
		return nil, fmt.Errorf("webhooks: %w", err)
	}
	exemptUsers := deps.ExemptUsernames
	if exemptUsers == nil {
		exemptUsers = []string{ServiceAccountUsername}
	}
	exemptNamespaces := deps.ExemptNamespaces
	if exemptNamespaces == nil {
		exemptNamespaces = DefaultExemptNamespaces()
	}
	users := stringSet(exemptUsers)
	namespaces := stringSet(exemptNamespaces)
	gate := &policyGate{engine: deps.Engine, metrics: m, onDryRun: deps.OnDryRun, log: log.WithName("policy")}
	checks := &templateChecks{reader: deps.Reader, instanceTypes: deps.InstanceTypes}
	validator := func(kind string, check semanticCheck) *Validator {
		return &Validator{kind: kind, check: check, gate: gate, exempt: users}
	}
	pods := &PodTenancyValidator{
		reader: deps.Reader, gate: gate, exemptNamespaces: namespaces, exemptUsers: users, log: log.WithName("pod-validate"),
	}
	return map[string]DecodedHandler{
		PathDefaultNodePool:            NewNodePoolDefaulter(),
		PathDefaultNodeClaim:           NewNodeClaimDefaulter(),
		PathDefaultEC2NodeClass:        NewEC2NodeClassDefaulter(),
		PathDefaultLocalNodeClass:      NewLocalNodeClassDefaulter(),
		PathValidateNodePool:           validator("NodePool", checks.nodePool),
		PathValidateNodeClaim:          validator("NodeClaim", checks.nodeClaim),
		PathValidateEC2NodeClass:       validator(ec2NodeClassKind, nil),
		PathValidateLocalNodeClass:     validator(localNodeClassKind, localNodeClass),
		PathValidateProvisioningPolicy: NewProvisioningPolicyValidator(exemptUsers),
		PathMutatePod: &PodTenancyMutator{
			reader: deps.Reader, exemptNamespaces: namespaces, log: log.WithName("pod-mutate"),
		},
		PathValidatePod:      pods,
		PathValidateWorkload: &WorkloadValidator{pods: pods},
	}, nil
}

// Register serves every handler on server (mgr.GetWebhookServer()) at its path. The webhook
// configurations that point at these paths should use failurePolicy Ignore and timeoutSeconds 5 (see the
// package documentation), sideEffects None, and for the Pod webhooks a namespaceSelector on
// joiner.dev/nodepools=bound.
func Register(server webhook.Server, deps Dependencies) error {
	handlers, err := NewHandlers(deps)
	if err != nil {
		return err
	}
	base := deps.Logger
	if base.GetSink() == nil {
		base = logr.Discard()
	}
	for _, path := range Paths() {
		logger := base.WithValues("webhook", path)
		server.Register(path, &admission.Webhook{
			Handler: handlers[path],
			LogConstructor: func(_ logr.Logger, req *admission.Request) logr.Logger {
				return admission.DefaultLogConstructor(logger, req)
			},
		})
	}
	return nil
}

func stringSet(names []string) map[string]bool {
	set := make(map[string]bool, len(names))
	for _, n := range slices.Compact(slices.Sorted(slices.Values(names))) {
		set[n] = true
	}
	return set
}
