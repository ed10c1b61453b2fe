package policy

import (
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// ViolationRule is the name of the set rule every policy must define.
const ViolationRule = "violation"

// regoFile is the file name compile errors are reported against (the Rego lives in spec.rego).
const regoFile = "spec.rego"

// forbiddenBuiltinPrefixes and forbiddenBuiltinNames are removed from the capabilities every policy is
// compiled with, together with every builtin OPA itself marks non-deterministic (io.jwt.decode_verify,
// json.match_schema and others that may fetch remote data or read the clock). A verdict must depend only on
// the review, the parameters and the inventory, or the webhook, audit and offline CLI could disagree.
//
// allowedNetBuiltins are the net.* builtins policies may call despite the "net." prefix: they only compute
// on CIDR strings given to them (subnet policies on node classes need them), and their results are no
// larger than their arguments. The other net.* builtins stay forbidden: net.lookup_ip_addr queries DNS,
// net.cidr_expand can allocate without bound (every address of a /8), and net.cidr_overlap is deprecated.
//
// print and trace stay allowed: they never change a result. The engine compiles policies with print
// statements erased (no output in the webhook path) and RunTests in policy/offline enables them, so print
// output shows up next to failing tests.
var (
	forbiddenBuiltinPrefixes = []string{"http.", "net.", "rand.", "uuid."}
	forbiddenBuiltinNames    = []string{"opa.runtime", "time.now_ns"}
	allowedNetBuiltins       = []string{"net.cidr_contains", "net.cidr_contains_matches", "net.cidr_intersects", "net.cidr_is_valid", "net.cidr_merge"}
)

// ForbiddenBuiltin reports whether a policy may not call the builtin name (such as "http.send"): a
// network, clock, random or runtime builtin, or one refused because its result cannot be bounded (see
// builtinBounds).
func ForbiddenBuiltin(name string) bool {
	if slices.Contains(forbiddenBuiltinNames, name) {
		return true
	}
	if _, ok := refusedForSize(name); ok {
		return true
	}
	if slices.Contains(allowedNetBuiltins, name) {
		return false
	}
	for _, p := range forbiddenBuiltinPrefixes {
		if strings.HasPrefix(name, p) {
			return true
		}
	}
	for _, b := range ast.Builtins {
		if b.Name == name {
			return b.IsNondeterministic()
		}
	}
	return false
}

// Capabilities returns the OPA capabilities policies are compiled with: this OPA version's, minus the
// forbidden builtins. policy/offline compiles tests with the same capabilities.
func Capabilities() *ast.Capabilities {
	caps := ast.CapabilitiesForThisVersion()
	caps.Builtins = slices.DeleteFunc(caps.Builtins, func(b *ast.Builtin) bool { return ForbiddenBuiltin(b.Name) })
	return caps
}

// ParseRego parses policy source as Rego v1, with errors reported against filename.
func ParseRego(filename, src string) (*ast.Module, error) {
	return ast.ParseModuleWithOpts(filename, src, ast.ParserOptions{RegoVersion: ast.RegoV1, ProcessAnnotation: true})
}

// NewCompiler returns a compiler configured exactly like the engine's: strict mode and the sandboxed
// capabilities. policy/offline uses it for tests so tests see the policies as the engine does.
func NewCompiler(caps *ast.Capabilities) *ast.Compiler {
	return ast.NewCompiler().
		WithStrict(true).
		WithCapabilities(caps).
		WithDefaultRegoVersion(ast.RegoV1)
}

// Validate checks a policy the way the engine will compile it and returns a user-facing error naming the
// field and the fix: a Rego syntax or compile error (with line:column), a missing or malformed `violation`
// rule, a forbidden builtin, a numbers.range or numbers.range_step whose constant bounds exceed
// MaxBuiltinArrayLength, an unknown enforcement action, kind or operation, an invalid namespace
// selector, or parameters that are not JSON. The ProvisioningPolicy webhook calls it to reject bad policies.
func Validate(p Policy) error {
	_, err := compile(p, Capabilities())
	return err
}

// compiled is everything derived from a Policy that evaluation needs except the prepared query.
type compiled struct {
	compiler *ast.Compiler
	query    ast.Ref // data.<package>.violation
	kinds    map[string]struct{}
	ops      opSet
	selector labels.Selector // nil: no namespace selector
	// templates: the policy also judges workloads' pod templates (Match.WorkloadTemplates).
	templates bool
	matchErr  error // set when spec.match is invalid
	params    *ast.Term
}

type opSet uint8

const (
	opCreate opSet = 1 << iota
	opUpdate
	opDelete
)

func opBit(op Operation) opSet {
	switch op {
	case OperationCreate:
		return opCreate
	case OperationUpdate:
		return opUpdate
	case OperationDelete:
		return opDelete
	}
	return 0
}

// compile validates every field of p and compiles its Rego. All errors name the spec field they concern.
func compile(p Policy, caps *ast.Capabilities) (*compiled, error) {
	c, errs := compileSpec(p)
	if err := c.compileRego(p.Rego, caps); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return c, fmt.Errorf("policy %s: %w", p.Name, err)
	}
	return c, nil
}

// compileSpec checks and converts everything but the Rego: name, enforcement action, match and parameters.
func compileSpec(p Policy) (*compiled, []error) {
	c := &compiled{}
	var errs []error
	if p.Name == "" {
		errs = append(errs, errors.New("metadata.name: a policy needs a name; it prefixes every violation message"))
	}
	switch p.EnforcementAction {
	case "", ActionDeny, ActionWarn, ActionDryRun:
	default:
		errs = append(errs, fmt.Errorf("spec.enforcementAction: %q is not supported; use Deny, Warn or DryRun", p.EnforcementAction))
	}
	if err := c.compileMatch(p.Match); err != nil {
		errs = append(errs, err)
	}
	params := p.Parameters
	if params == nil {
		params = map[string]any{}
	}
	if v, err := ast.InterfaceToValue(params); err != nil {
		errs = append(errs, fmt.Errorf("spec.parameters: not a JSON object: %w", err))
	} else {
		c.params = ast.NewTerm(v)
	}
	return c, errs
}

func (c *compiled) compileMatch(m Match) error {
	var errs []error
	if len(m.Kinds) > 0 {
		c.kinds = make(map[string]struct{}, len(m.Kinds))
		for i, k := range m.Kinds {
			if !slices.Contains(MatchableKinds(), k) {
				errs = append(errs, fmt.Errorf("spec.match.kinds[%d]: %q is not supported; use one of %s", i, k, strings.Join(MatchableKinds(), ", ")))
				continue
			}
			c.kinds[k] = struct{}{}
		}
	}
	if len(m.Operations) == 0 {
		c.ops = opCreate | opUpdate
	}
	for i, op := range m.Operations {
		bit := opBit(Operation(op))
		if bit == 0 {
			errs = append(errs, fmt.Errorf("spec.match.operations[%d]: %q is not supported; use CREATE, UPDATE or DELETE", i, op))
		}
		c.ops |= bit
	}
	if m.NamespaceSelector != nil {
		if len(m.Kinds) > 0 && !slices.Contains(m.Kinds, KindPod) {
			errs = append(errs, errors.New("spec.match.namespaceSelector: applies to Pods only; add Pod to spec.match.kinds or remove the selector"))
		}
		sel, err := metav1.LabelSelectorAsSelector(m.NamespaceSelector)
		if err != nil {
			errs = append(errs, fmt.Errorf("spec.match.namespaceSelector: %w", err))
		}
		c.selector = sel
	}
	if m.WorkloadTemplates && len(m.Kinds) > 0 && !slices.Contains(m.Kinds, KindPod) {
		errs = append(errs, errors.New("spec.match.workloadTemplates: judges the pod templates of workloads with the policy's Pod rules; add Pod to spec.match.kinds or remove workloadTemplates"))
	}
	c.templates = m.WorkloadTemplates
	c.matchErr = errors.Join(errs...)
	return c.matchErr
}

// undefinedFunction extracts the name from OPA's "undefined function NAME" type error.
var undefinedFunction = regexp.MustCompile(`undefined function ([A-Za-z0-9_.]+)`)

func (c *compiled) compileRego(src string, caps *ast.Capabilities) error {
	if strings.TrimSpace(src) == "" {
		return errors.New("spec.rego: empty; write a Rego v1 module with a package and a `violation contains {\"msg\": msg} if { ... }` rule")
	}
	mod, err := ParseRego(regoFile, src)
	if err != nil {
		return regoError(err)
	}
	if err := checkViolationRule(mod); err != nil {
		return err
	}
	compiler := NewCompiler(caps)
	compiler.Compile(map[string]*ast.Module{regoFile: mod})
	if compiler.Failed() {
		return regoError(compiler.Errors)
	}
	if err := checkStaticRanges(compiler.Modules[regoFile]); err != nil {
		return err
	}
	c.compiler = compiler
	c.query = mod.Package.Path.Copy().Append(ast.StringTerm(ViolationRule))
	return nil
}

// checkViolationRule requires a multi-value (set) rule named violation in the module's own package.
func checkViolationRule(mod *ast.Module) error {
	found := false
	for _, r := range mod.Rules {
		ref := r.Head.Ref()
		if len(ref) == 0 || !ref[0].Equal(ast.VarTerm(ViolationRule)) {
			continue
		}
		found = true
		loc := r.Location
		switch {
		case len(ref) > 1:
			return locatedError(loc, "rule violation must be a plain set rule, not a nested reference; write `violation contains {\"msg\": msg} if { ... }`")
		case len(r.Head.Args) > 0:
			return locatedError(loc, "violation is declared as a function; write it as a set rule: `violation contains {\"msg\": msg} if { ... }`")
		case r.Head.RuleKind() != ast.MultiValue:
			return locatedError(loc, "rule violation must be a set of objects; write `violation contains {\"msg\": msg} if { ... }` instead of `violation := ...` or `violation if ...`")
		}
	}
	if !found {
		return fmt.Errorf("spec.rego: no rule %q in package %s; add `violation contains {\"msg\": msg} if { ... }`", ViolationRule, strings.TrimPrefix(mod.Package.Path.String(), "data."))
	}
	return nil
}

func locatedError(loc *ast.Location, msg string) error {
	row, col := 0, 0
	if loc != nil {
		row, col = loc.Row, loc.Col
	}
	return fmt.Errorf("spec.rego:%d:%d: %s", row, col, msg)
}

// regoError rewrites OPA parse and compile errors as "spec.rego:line:col: message" lines, and explains
// calls to forbidden builtins instead of reporting them as undefined.
func regoError(err error) error {
	var errs ast.Errors
	if !errors.As(err, &errs) {
		return fmt.Errorf("spec.rego: %w", err)
	}
	lines := make([]string, 0, len(errs))
	for _, e := range errs {
		msg := e.Message
		if m := undefinedFunction.FindStringSubmatch(msg); m != nil && ForbiddenBuiltin(m[1]) {
			msg = forbiddenBuiltinMessage(m[1])
		}
		row, col := 0, 0
		if e.Location != nil {
			row, col = e.Location.Row, e.Location.Col
		}
		lines = append(lines, fmt.Sprintf("spec.rego:%d:%d: %s: %s", row, col, e.Code, msg))
	}
	return errors.New(strings.Join(lines, "\n"))
}

// forbiddenBuiltinMessage explains why a policy may not call the forbidden builtin name and what to do
// instead.
func forbiddenBuiltinMessage(name string) string {
	if why, ok := refusedForSize(name); ok {
		return fmt.Sprintf("builtin %s is not allowed: %s", name, why)
	}
	return fmt.Sprintf("builtin %s is not allowed: policies may not call network, clock, random, UUID or runtime builtins (http.*, net.* other than %s, rand.*, uuid.*, time.now_ns, opa.runtime, or any OPA marks non-deterministic), so that the webhook, audit and offline check always agree; derive the value from input.review, input.parameters or data.inventory instead", name, strings.Join(allowedNetBuiltins, ", "))
}
