package policy

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
)

// campaignSizes are the probe sizes of the campaign: one and two mebibytes of text (larger than any object
// the apiserver stores), 64 to 256 Ki elements of collections (past MaxBuiltinArrayLength), and each
// adversarial probe's largest (ten levels of YAML aliases, forty JSON patch copies, the largest
// exponents a policy may write).
var campaignSizes = []int{1 << 20, 1 << 21}

// Limits the campaign asserts: the operator's shipped memory limit, and the smallest timeoutSeconds of
// Joiner's webhook configurations.
const (
	campaignMemoryLimit = 1 << 30
	webhookTimeout      = 3 * time.Second
)

// notInCampaign are probed builtins a policy cannot call in the webhook path, with the reason.
var notInCampaign = map[string]string{
	"internal.test_case": "only `joiner policy test` calls it, for test rules",
}

// TestBuiltinCampaign evaluates, through the engine as the webhook does, admissible policies that call
// every allowed builtin with large and adversarial arguments (the probes), while a goroutine samples the
// Go heap. Every evaluation must end with a decision or a clear limit error (BuiltinLimitError or
// MemoryBudgetError) within the webhook timeout, and the Go memory must stay under the operator's 1 GiB
// limit. It logs the peak: go test -run TestBuiltinCampaign -v ./policy/
func TestBuiltinCampaign(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: evaluates a policy per builtin and probe with inputs of up to 4 MiB; make test runs it")
	}
	runtime.GC()
	resetPeakRSS()
	sampler := startMemorySampler(time.Millisecond)
	start := time.Now()
	var total campaignTally
	for _, name := range campaignBuiltins() {
		total.add(campaignBuiltin(t, name))
	}
	total.add(campaignChains(t))
	heap, mem := sampler.stop()
	t.Logf("campaign: %d builtins, %d evaluations in %s (%d with a value, %d undefined, %d stopped by a limit), slowest review %s; peak Go heap %.0f MiB, peak Go memory %.0f MiB, peak RSS %s",
		len(campaignBuiltins()), total.evaluations, time.Since(start).Round(time.Millisecond), total.values, total.undefined, total.limited,
		total.slowest.Round(time.Millisecond), mib(heap), mib(mem), peakRSS())
	if mem > campaignMemoryLimit {
		t.Errorf("peak Go memory %.0f MiB is over the operator's %.0f MiB limit", mib(mem), mib(campaignMemoryLimit))
	}
}

// campaignTally counts the outcomes of the campaign's evaluations.
type campaignTally struct {
	evaluations, values, undefined, limited int
	slowest                                 time.Duration
}

func (c *campaignTally) add(o campaignTally) {
	c.evaluations, c.values, c.undefined, c.limited = c.evaluations+o.evaluations, c.values+o.values, c.undefined+o.undefined, c.limited+o.limited
	c.slowest = max(c.slowest, o.slowest)
}

func mib(n uint64) float64 { return float64(n) / (1 << 20) }

// campaignBuiltins returns the allowed builtins the campaign calls, sorted. Deprecated builtins are left
// out: the engine compiles in strict mode, which rejects calls to them, so no admissible policy has one.
func campaignBuiltins() []string {
	var names []string
	for _, b := range Capabilities().Builtins {
		if _, ok := builtinProbes[b.Name]; ok && notInCampaign[b.Name] == "" && !b.Deprecated {
			names = append(names, b.Name)
		}
	}
	slices.Sort(names)
	return names
}

// chains are policies that grow values over several builtin calls, each within its bounds, so that only
// their sum can threaten the memory: the engine's memory budget, or the next call's bound, must stop them.
var chains = map[string]string{
	"text-then-submatches": `s := concat("", [t | some _ in numbers.range(1, 100000); t := "aaaaaaaaaa"])
	x := count(regex.find_all_string_submatch_n("(a)", s, -1))`,
	"repeated-squaring": `a := to_number(input.parameters.n)
	b := a * a
	c := b * b
	d := c * c
	x := d * d`,
	"base64-growth": `s1 := base64.encode(input.parameters.s)
	s2 := base64.encode(concat("", [s1, s1, s1, s1]))
	s3 := base64.encode(concat("", [s2, s2, s2, s2]))
	x := count(base64.encode(concat("", [s3, s3, s3, s3])))`,
	"marshal-round-trips": `doc := [{"name": sprintf("n%d", [i]), "v": [i, i]} | some i in numbers.range(1, 50000)]
	x := count(json.unmarshal(json.marshal(json.unmarshal(json.marshal(doc)))))`,
	"split-everything": `parts := [p | some i in numbers.range(1, 20); some p in split(input.parameters.s, "")]
	x := count(parts)`,
	"walk-the-review": `x := count([p | walk(input.review.object, [p, _])])`,
}

// campaignChains evaluates the chains against a review carrying a large annotation.
func campaignChains(t *testing.T) campaignTally {
	t.Helper()
	params := map[string]any{"n": strings.Repeat("9", 1000), "s": strings.Repeat("ab,c<d", 1<<16)}
	var policies []Policy
	for name, body := range chains {
		rego := fmt.Sprintf("package chain\n\nviolation contains {\"msg\": sprintf(\"%%v\", [x])} if {\n\t%s\n}\n", body)
		policies = append(policies, Policy{Name: name, Rego: rego, Parameters: params})
	}
	annotations := map[string]any{"big": strings.Repeat("x", 1<<20)}
	for i := range 1000 {
		annotations[fmt.Sprintf("a%d", i)] = strings.Repeat("y", 100)
	}
	return campaignEvaluate(t, "chains", policies, map[string]any{
		"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": map[string]any{"name": "campaign", "annotations": annotations},
	})
}

// campaignBuiltin evaluates one review against a policy per probe and size of builtin name, and checks
// each result: a violation (the call returned), none (the call failed, which makes it undefined, as in
// OPA's default mode), or a limit error.
func campaignBuiltin(t *testing.T, name string) campaignTally {
	t.Helper()
	var policies []Policy
	for _, p := range builtinProbes[name] {
		for _, n := range campaignSizes {
			pol := admissiblePolicy(name, p, min(n, p.limit()))
			if !slices.ContainsFunc(policies, func(q Policy) bool { return q.Name == pol.Name }) {
				policies = append(policies, pol)
			}
		}
	}
	return campaignEvaluate(t, name, policies, map[string]any{
		"apiVersion": "karpenter.sh/v1", "kind": "NodePool", "metadata": map[string]any{"name": "campaign"},
	})
}

// campaignEvaluate evaluates a review of object against policies, as the webhook does, and checks that
// every policy ends with a decision or a limit error, within the webhook timeout.
func campaignEvaluate(t *testing.T, name string, policies []Policy, object map[string]any) campaignTally {
	t.Helper()
	e := New(Options{})
	if err := e.SetPolicies(context.Background(), policies); err != nil {
		t.Fatalf("the campaign's policies are not admissible: %v", err)
	}
	review, err := NewReview(OperationCreate, object, nil)
	if err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	vs, err := e.Evaluate(context.Background(), review)
	tally := campaignTally{evaluations: len(policies), slowest: time.Since(began)}
	if err != nil {
		t.Fatalf("%s: Evaluate: %v", name, err)
	}
	if tally.slowest > webhookTimeout {
		t.Errorf("%s: the review took %s, past the webhook timeout of %s", name, tally.slowest, webhookTimeout)
	}
	for _, v := range vs {
		var le *BuiltinLimitError
		var me *MemoryBudgetError
		switch {
		case v.Err == nil:
			tally.values++
		case errors.As(v.Err, &le), errors.As(v.Err, &me):
			tally.limited++
		default:
			t.Errorf("%s: evaluation ended with an error that is not a limit: %v", v.Policy, v.Err)
		}
	}
	tally.undefined = len(policies) - len(vs)
	return tally
}

// admissiblePolicy returns the campaign's policy for probe p of builtin at size n, or at the largest
// smaller size whose numbers the engine accepts: OPA refuses numbers whose binary exponent passes 100,000
// in policies and parameters alike, so no policy can hold the largest exponents of the number probes.
// (SetPolicies then checks that the policy is admissible.)
func admissiblePolicy(builtin string, p probe, n int) Policy {
	for ; n > 0 && !admissibleNumbers(p.args(n)); n /= 2 {
	}
	return campaignPolicy(builtin, fmt.Sprintf("%s/%s/%d", builtin, p.name, n), p.args(n))
}

// admissibleNumbers reports whether OPA accepts every number among args as a parameter.
func admissibleNumbers(args []*ast.Term) bool {
	ok := true
	for _, arg := range args {
		ast.WalkTerms(arg, func(t *ast.Term) bool {
			if n, isNum := t.Value.(ast.Number); isNum {
				if _, err := ast.InterfaceToValue(json.Number(n)); err != nil {
					ok = false
				}
			}
			return !ok
		})
	}
	return ok
}

// campaignPolicy is a Deny policy calling builtin on args, passed as its parameters: its violation's
// message is the type of the result, so every evaluation that is not stopped yields one violation.
func campaignPolicy(builtin, name string, args []*ast.Term) Policy {
	params := make([]any, len(args))
	exprs := make([]string, len(args))
	for i, arg := range args {
		v, err := ast.JSON(arg.Value)
		if err != nil {
			panic(fmt.Sprintf("%s: argument %d: %v", name, i, err))
		}
		params[i] = v
		exprs[i] = argExpr(fmt.Sprintf("input.parameters.args[%d]", i), arg.Value)
	}
	body := "x := " + callExpr(builtin, exprs)
	if builtin == "internal.print" { // a statement, not a value
		body = callExpr(builtin, exprs) + "\n\tx := true"
	}
	rego := fmt.Sprintf("package campaign\n\nviolation contains {\"msg\": type_name(x)} if {\n\t%s\n}\n", body)
	return Policy{Name: strings.NewReplacer("/", "-", "_", "-", ".", "-").Replace(name), Rego: rego, Parameters: map[string]any{"args": params}}
}

// argExpr rebuilds an argument from its JSON form at path: sets became arrays.
func argExpr(path string, v ast.Value) string {
	set, ok := v.(ast.Set)
	if !ok {
		return path
	}
	nestedSets := false
	set.Until(func(t *ast.Term) bool { _, nestedSets = t.Value.(ast.Set); return true })
	if nestedSets {
		return fmt.Sprintf("{{e | some e in s} | some s in %s}", path)
	}
	return fmt.Sprintf("{e | some e in %s}", path)
}

// callExpr is the Rego calling builtin with args, in the syntax a policy uses.
func callExpr(builtin string, args []string) string {
	switch builtin {
	case "internal.member_2":
		return fmt.Sprintf("%s in %s", args[0], args[1])
	case "internal.member_3":
		return fmt.Sprintf("%s, %s in %s", args[0], args[1], args[2])
	case "internal.print":
		return fmt.Sprintf("print(%s[0], %s[1])", args[0], args[0])
	case "internal.template_string":
		return fmt.Sprintf(`$"{%s[0]}{%s[1]}"`, args[0], args[0])
	}
	return fmt.Sprintf("%s(%s)", builtin, strings.Join(args, ", "))
}

// memorySampler records the peaks of the Go heap and of all the memory the Go runtime holds.
type memorySampler struct {
	heap, total atomic.Uint64
	done        chan struct{}
	wg          sync.WaitGroup
}

func startMemorySampler(interval time.Duration) *memorySampler {
	s := &memorySampler{done: make(chan struct{})}
	samples := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}, {Name: "/memory/classes/total:bytes"}}
	read := func() {
		metrics.Read(samples)
		s.heap.Store(max(s.heap.Load(), samples[0].Value.Uint64()))
		s.total.Store(max(s.total.Load(), samples[1].Value.Uint64()-releasedBytes()))
	}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		for {
			read()
			select {
			case <-s.done:
				return
			case <-ticker.C:
			}
		}
	}()
	return s
}

// releasedBytes is the memory the Go runtime returned to the operating system, which total:bytes counts.
func releasedBytes() uint64 {
	s := []metrics.Sample{{Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// stop ends sampling and returns the peaks.
func (s *memorySampler) stop() (heap, total uint64) {
	close(s.done)
	s.wg.Wait()
	return s.heap.Load(), s.total.Load()
}

// resetPeakRSS resets the process's peak resident set size (Linux), so that peakRSS reports the
// campaign's, not the earlier tests'.
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSS returns the process's peak resident set size (VmHWM), or "unknown" off Linux.
func peakRSS() string {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return "unknown"
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			return strings.TrimSpace(v)
		}
	}
	return "unknown"
}
