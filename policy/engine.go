package policy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/metrics"
	"k8s.io/apimachinery/pkg/labels"
)

// DefaultEvalTimeout bounds one Evaluate call. It sits below Gatekeeper's 3 s webhook timeout and the 5 s
// timeoutSeconds recommended for Joiner's webhook, so a runaway policy yields an error result the webhook
// can act on instead of an apiserver-side webhook timeout.
const DefaultEvalTimeout = 2 * time.Second

// Options configure an Engine. The zero value is usable.
type Options struct {
	// Logger receives compile results and evaluation failures. The zero value discards logs.
	Logger logr.Logger
	// EvalTimeout bounds one Evaluate call (all policies matched by one review). Zero means DefaultEvalTimeout.
	// Policies still running (or not yet started) at the deadline produce error results; policies that
	// finished keep their results. With Parallelism above 1 one slow policy cannot starve the others.
	EvalTimeout time.Duration
	// Parallelism is the number of goroutines one Evaluate call spreads its policies over. Zero means
	// GOMAXPROCS; 1 evaluates policies one after the other on the caller's goroutine.
	Parallelism int
	// MemoryBudget bounds, in bytes, how much the heap may grow while one Evaluate call runs. While
	// evaluations run the engine samples the heap every millisecond (runtime/metrics) and stops those
	// during which it grew past the budget; each stopped policy yields an error result (a
	// MemoryBudgetError naming the policy and the budget), which denies for Deny policies. The heap is
	// the process's, so every evaluation running at that moment is stopped. Zero means
	// DefaultMemoryBudget; a negative value disables the budget. Builtins that could build a huge value
	// in one uninterruptible call are bounded separately (MaxBuiltinArrayLength, MaxBuiltinStringBytes).
	MemoryBudget int64
}

// Engine compiles policies and evaluates reviews against them. All methods are safe for concurrent use:
// evaluations run against an immutable policy set that SetPolicies, UpsertPolicy and RemovePolicy replace
// atomically, so a concurrent evaluation sees either the old set or the new one, never a mix.
type Engine struct {
	log         logr.Logger
	evalTimeout time.Duration
	parallelism int
	caps        *ast.Capabilities
	store       *snapshotStore // serves data.inventory to OPA
	inventory   inventory
	noMetrics   metrics.Metrics
	caches      virtualCachePool
	workers     *workerPool
	memory      *memoryGuard

	set atomic.Pointer[policySet]
	mu  sync.Mutex // serialises writers of set
}

// policySet is an immutable snapshot of the compiled policies, sorted by name.
type policySet struct {
	policies []*compiledPolicy
}

// compiledPolicy is one policy ready to evaluate. A policy that failed to compile has err set and produces an
// error result for every review it matches (when its Match could be read), so a broken policy is visible
// instead of silently allowing everything.
type compiledPolicy struct {
	policy   Policy
	compiled *compiled
	query    *preparedQuery
	err      error
	inputs   sync.Pool // of ast.Object: recycled input documents, see acquireInput
}

// preparedQuery is a policy's compiled query `violation = data.<package>.violation`, evaluated directly with
// topdown: going through rego.PreparedEvalQuery cost an EvalContext, option closures and a rego.ResultSet per
// policy per review, a fifth of the bytes allocated per evaluation, for nothing the engine uses.
type preparedQuery struct {
	compiler      *ast.Compiler
	queryCompiler ast.QueryCompiler
	body          ast.Body
	result        ast.Var // the variable bound to the value of the violation rule
}

// resultVar is the query variable that receives the value of the violation rule.
const resultVar = ast.Var("joiner_violation_result")

// prepareQuery compiles the query for the violation rule of c, as rego.PrepareForEval would.
func prepareQuery(c *compiled) (*preparedQuery, error) {
	qc := c.compiler.QueryCompiler().
		WithContext(ast.NewQueryContext()).
		WithEnablePrintStatements(false).
		WithStrict(false)
	body, err := qc.Compile(ast.NewBody(ast.Equality.Expr(ast.NewTerm(resultVar), ast.NewTerm(c.query))))
	if err != nil {
		return nil, err
	}
	result := resultVar
	for rewritten, orig := range qc.RewrittenVars() {
		if orig == resultVar {
			result = rewritten
		}
	}
	return &preparedQuery{compiler: c.compiler, queryCompiler: qc, body: body, result: result}, nil
}

// New returns an engine with no policies and an empty inventory.
func New(opts Options) *Engine {
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	if opts.EvalTimeout <= 0 {
		opts.EvalTimeout = DefaultEvalTimeout
	}
	if opts.Parallelism <= 0 {
		opts.Parallelism = runtime.GOMAXPROCS(0)
	}
	if opts.MemoryBudget == 0 {
		opts.MemoryBudget = DefaultMemoryBudget
	}
	e := &Engine{
		workers:     newWorkerPool(),
		memory:      newMemoryGuard(opts.MemoryBudget, memorySampleInterval, readHeap),
		log:         opts.Logger,
		evalTimeout: opts.EvalTimeout,
		parallelism: opts.Parallelism,
		caps:        Capabilities(),
		store:       newSnapshotStore(ast.NewObject()),
		noMetrics:   metrics.NoOp(),
	}
	e.inventory.store = e.store
	e.inventory.publish()
	e.set.Store(&policySet{})
	return e
}

// CompileErrors maps the name of each policy that failed to compile to its error. SetPolicies and
// UpsertPolicy return it; the failed policies stay installed and report error results when they match.
type CompileErrors map[string]error

// Error lists the failures, one policy per line, sorted by name.
func (ce CompileErrors) Error() string {
	names := slices.Sorted(maps.Keys(ce))
	lines := make([]string, len(names))
	for i, n := range names {
		lines[i] = ce[n].Error()
	}
	return strings.Join(lines, "\n")
}

// SetPolicies replaces the whole policy set. A policy whose name, generation and Rego are unchanged keeps
// its prepared query; the others are compiled. The new set is swapped in atomically once every policy has
// been processed. The returned error, if any, is a CompileErrors.
func (e *Engine) SetPolicies(ctx context.Context, policies []Policy) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	old := e.set.Load()
	seen := make(map[string]bool, len(policies))
	next := make([]*compiledPolicy, 0, len(policies))
	failed := CompileErrors{}
	for _, p := range policies {
		if seen[p.Name] {
			failed[p.Name] = fmt.Errorf("policy %s: defined twice; policy names must be unique", p.Name)
			continue
		}
		seen[p.Name] = true
		cp := e.compilePolicy(ctx, p, old.find(p.Name))
		if cp.err != nil {
			failed[p.Name] = cp.err
		}
		next = append(next, cp)
	}
	sort.Slice(next, func(i, j int) bool { return next[i].policy.Name < next[j].policy.Name })
	e.set.Store(&policySet{policies: next})
	e.log.V(1).Info("policy set installed", "policies", len(next), "failed", len(failed))
	if len(failed) > 0 {
		return failed
	}
	return nil
}

// UpsertPolicy adds or replaces one policy, for controllers that react to one ProvisioningPolicy at a time.
// The returned error, if any, is a CompileErrors; the policy is installed either way.
func (e *Engine) UpsertPolicy(ctx context.Context, p Policy) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	old := e.set.Load()
	cp := e.compilePolicy(ctx, p, old.find(p.Name))
	next := make([]*compiledPolicy, 0, len(old.policies)+1)
	for _, o := range old.policies {
		if o.policy.Name != p.Name {
			next = append(next, o)
		}
	}
	next = append(next, cp)
	sort.Slice(next, func(i, j int) bool { return next[i].policy.Name < next[j].policy.Name })
	e.set.Store(&policySet{policies: next})
	if cp.err != nil {
		return CompileErrors{p.Name: cp.err}
	}
	return nil
}

// RemovePolicy removes the named policy; it is a no-op if there is none.
func (e *Engine) RemovePolicy(name string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	old := e.set.Load()
	next := slices.DeleteFunc(slices.Clone(old.policies), func(cp *compiledPolicy) bool { return cp.policy.Name == name })
	e.set.Store(&policySet{policies: next})
}

// PolicyNames returns the names of the installed policies, sorted.
func (e *Engine) PolicyNames() []string {
	set := e.set.Load()
	names := make([]string, len(set.policies))
	for i, cp := range set.policies {
		names[i] = cp.policy.Name
	}
	return names
}

func (s *policySet) find(name string) *compiledPolicy {
	i, ok := slices.BinarySearchFunc(s.policies, name, func(cp *compiledPolicy, n string) int { return strings.Compare(cp.policy.Name, n) })
	if !ok {
		return nil
	}
	return s.policies[i]
}

// compilePolicy compiles p, reusing prev's prepared query when only the match, action or parameters changed.
func (e *Engine) compilePolicy(ctx context.Context, p Policy, prev *compiledPolicy) *compiledPolicy {
	p.Parameters = maps.Clone(p.Parameters)
	cp := &compiledPolicy{policy: p}
	reuse := prev != nil && prev.query != nil && prev.policy.Generation == p.Generation && prev.policy.Rego == p.Rego
	if reuse {
		// Only the cheap parts need redoing; the Rego compile and query preparation are kept.
		c, errs := compileSpec(p)
		if err := errors.Join(errs...); err != nil {
			cp.err = fmt.Errorf("policy %s: %w", p.Name, err)
			cp.compiled = matchOnly(c)
			return cp
		}
		c.compiler, c.query = prev.compiled.compiler, prev.compiled.query
		cp.compiled, cp.query = c, prev.query
		e.log.V(2).Info("policy unchanged, keeping prepared query", "policy", p.Name, "generation", p.Generation)
		return cp
	}
	c, err := compile(p, e.caps)
	if err != nil {
		cp.err = err
		// Keep the match if it was readable, so the broken policy reports errors where it would have applied.
		cp.compiled = matchOnly(c)
		e.log.Error(err, "policy failed to compile", "policy", p.Name, "generation", p.Generation)
		return cp
	}
	pq, err := prepareQuery(c)
	if err != nil {
		cp.err = fmt.Errorf("policy %s: prepare query %s: %w", p.Name, c.query, err)
		cp.compiled = matchOnly(c)
		e.log.Error(err, "policy query failed to prepare", "policy", p.Name, "generation", p.Generation)
		return cp
	}
	cp.compiled, cp.query = c, pq
	e.log.V(1).Info("policy compiled", "policy", p.Name, "generation", p.Generation)
	return cp
}

// matchOnly keeps the matching part of c, or nil if the match itself was invalid.
func matchOnly(c *compiled) *compiled {
	if c == nil || c.matchErr != nil {
		return nil
	}
	return &compiled{kinds: c.kinds, ops: c.ops, selector: c.selector, templates: c.templates}
}

// matches reports whether cp applies to r.
func (cp *compiledPolicy) matches(r *Review) bool {
	c := cp.compiled
	if c == nil {
		// The match itself was invalid: report the broken policy for every review so it is noticed, but
		// not for workload templates, which it may not have opted into; the Pod-level check reports it.
		return r.Template == nil
	}
	if r.Template != nil && !c.templates {
		return false
	}
	if c.ops&opBit(r.Operation) == 0 {
		return false
	}
	if c.kinds != nil {
		if _, ok := c.kinds[r.Kind.Kind]; !ok {
			return false
		}
	}
	if c.selector != nil && r.Kind.Kind == KindPod && !c.selector.Matches(labels.Set(r.NamespaceLabels)) {
		return false
	}
	return true
}
