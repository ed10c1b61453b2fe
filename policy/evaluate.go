package policy

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/storage"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// acquireInput returns the input document {"review": review, "parameters": <the policy's parameters>}.
// The two-key object is recycled between evaluations of the policy (building it cost a map and four other
// allocations per policy per review); review and the parameters themselves are never modified.
func (cp *compiledPolicy) acquireInput(review *ast.Term) ast.Object {
	if obj, ok := cp.inputs.Get().(ast.Object); ok {
		obj.Insert(keyReview, review)
		return obj
	}
	return inputValue(review, cp.compiled.params)
}

// releaseInput recycles an input document once nothing refers to it: the evaluation is over and its result
// has been converted. It drops the review so that a pooled input does not keep it alive.
func (cp *compiledPolicy) releaseInput(obj ast.Object) {
	obj.Insert(keyReview, nullTerm)
	cp.inputs.Put(obj)
}

var nullTerm = ast.NullTerm()

// Evaluate runs every policy that matches the review and returns their violations, ordered by policy name
// and then by violation. A policy that cannot be evaluated (compile failure, deadline, memory budget, a
// builtin over MaxBuiltinArrayLength or MaxBuiltinStringBytes, a conflict, malformed violation, panic)
// yields one Violation with Err set and never affects the other policies. A builtin that fails, such as
// to_number("zero"), makes its expression undefined, as in OPA's default mode and Gatekeeper, so a ported
// policy reaches the same verdict.
// The returned error is reserved for problems with the review itself (unsupported operation, missing kind,
// an object that is not JSON) and for a context that is already done.
func (e *Engine) Evaluate(ctx context.Context, r Review) ([]Violation, error) {
	if err := r.validate(); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("evaluate %s %q: %w", r.Kind.Kind, r.Name, err)
	}
	set := e.set.Load()
	var matched []*compiledPolicy
	for _, cp := range set.policies {
		if cp.matches(&r) && !r.Skip[cp.policy.Name] {
			matched = append(matched, cp)
		}
	}
	if len(matched) == 0 {
		return nil, nil
	}
	review, err := reviewTerm(&r)
	if err != nil {
		return nil, fmt.Errorf("evaluate: %w", err)
	}

	ctx, cancelCtx := context.WithTimeout(ctx, e.evalTimeout)
	defer cancelCtx()
	// One cancel flag for all queries of this review, raised when the deadline passes; this saves the
	// goroutine OPA would otherwise start per query to watch the context.
	cancel := topdown.NewCancel()
	stop := context.AfterFunc(ctx, cancel.Cancel)
	defer stop()
	// The memory guard raises the same flag when the heap grows past the budget while this review runs.
	window := e.memory.begin(cancel)
	defer e.memory.end(window)
	// One transaction pins the inventory snapshot, so all policies of this review see the same one.
	txn, err := e.store.NewTransaction(ctx)
	if err != nil {
		return nil, fmt.Errorf("evaluate: open inventory transaction: %w", err)
	}
	defer e.store.Abort(ctx, txn)

	results := make([][]Violation, len(matched))
	run := func(i int) {
		results[i] = e.evalPolicy(ctx, matched[i], review, txn, cancel, window)
	}
	if workers := min(e.parallelism, len(matched)); workers <= 1 {
		for i := range matched {
			run(i)
		}
	} else {
		// Workers take the next unevaluated policy until none is left; the caller is one of them.
		var next atomic.Int64
		work := func() {
			for i := int(next.Add(1) - 1); i < len(matched); i = int(next.Add(1) - 1) {
				run(i)
			}
		}
		var wg sync.WaitGroup
		wg.Add(workers - 1)
		for range workers - 1 {
			e.workers.run(func() {
				defer wg.Done()
				work()
			})
		}
		work()
		wg.Wait()
	}
	n := 0
	for _, rs := range results {
		n += len(rs)
	}
	if n == 0 {
		return nil, nil
	}
	out := make([]Violation, 0, n)
	for _, rs := range results {
		out = append(out, rs...)
	}
	if r.Template != nil {
		for i := range out {
			if !out[i].IsError() {
				out[i].Field = r.Template.FieldPath(out[i].Field)
			}
		}
	}
	return out, nil
}

// evalPolicy evaluates one policy and never panics. Builtin errors are not strict: OPA records them and
// treats the failing expression as undefined, as its default mode and Gatekeeper do, so the policy goes on
// (usually to no violation). Cancellation (deadline, memory budget), the builtin size bounds (a Halt),
// conflicts and malformed results still fail the policy.
func (e *Engine) evalPolicy(ctx context.Context, cp *compiledPolicy, review *ast.Term, txn storage.Transaction, cancel topdown.Cancel, window *memoryWindow) (out []Violation) {
	p := &cp.policy
	fail := func(err error) []Violation {
		e.log.Error(err, "policy evaluation failed", "policy", p.Name)
		return []Violation{{Policy: p.Name, Action: p.Action(), Message: "policy evaluation failed: " + err.Error(), Err: err}}
	}
	if cp.err != nil {
		return fail(cp.err)
	}
	defer func() {
		if rec := recover(); rec != nil {
			out = fail(fmt.Errorf("policy %s panicked: %v", p.Name, rec))
		}
	}()
	cache := e.caches.acquire()
	defer e.caches.release(cache)
	pq := cp.query
	input := cp.acquireInput(review)
	defer cp.releaseInput(input)
	q := topdown.NewQuery(pq.body).
		WithQueryCompiler(pq.queryCompiler).
		WithCompiler(pq.compiler).
		WithStore(e.store).
		WithTransaction(txn).
		WithMetrics(e.noMetrics).
		WithIndexing(true).
		WithEarlyExit(true).
		WithStrictBuiltinErrors(false).
		WithVirtualCache(cache).
		WithInput(ast.NewTerm(input)).
		WithCancel(cancel)
	// The builtin errors that made expressions undefined are collected only for the debug log.
	var builtinErrs []topdown.Error
	if debug := e.log.V(1); debug.Enabled() {
		q = q.WithBuiltinErrorList(&builtinErrs)
		defer func() {
			for _, be := range builtinErrs {
				debug.Info("builtin error made an expression undefined", "policy", p.Name, "error", be.Error())
			}
		}()
	}
	var term *ast.Term
	err := q.Iter(ctx, func(qr topdown.QueryResult) error {
		term = qr[pq.result]
		return nil
	})
	if err != nil {
		if stopped, growth := window.stopped(); stopped && topdown.IsCancel(err) {
			return fail(&MemoryBudgetError{Policy: p.Name, Budget: int64(e.memory.budget), Growth: growth})
		}
		if ctxErr := ctx.Err(); ctxErr != nil && topdown.IsCancel(err) {
			if errors.Is(ctxErr, context.DeadlineExceeded) {
				return fail(fmt.Errorf("policy %s did not finish within %s: %w", p.Name, e.evalTimeout, ctxErr))
			}
			return fail(fmt.Errorf("policy %s: evaluation cancelled: %w", p.Name, ctxErr))
		}
		return fail(fmt.Errorf("policy %s: %w", p.Name, err))
	}
	if term == nil {
		return nil // violation undefined: no violations
	}
	vs, err := violationsFrom(p, term)
	if err != nil {
		return fail(err)
	}
	return vs
}

// violationsFrom converts the value of the violation rule: a set of {"msg", "field"?, "details"?} objects.
func violationsFrom(p *Policy, term *ast.Term) ([]Violation, error) {
	set, ok := term.Value.(ast.Set)
	if !ok {
		return nil, fmt.Errorf("policy %s: violation must be a set, got %s", p.Name, ast.ValueName(term.Value))
	}
	if set.Len() == 0 {
		return nil, nil
	}
	out := make([]Violation, 0, set.Len())
	var err error
	set.Foreach(func(el *ast.Term) {
		if err != nil {
			return
		}
		var v Violation
		v, err = violationFrom(p, el)
		out = append(out, v)
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

var (
	keyMsg     = ast.StringTerm("msg")
	keyField   = ast.StringTerm("field")
	keyDetails = ast.StringTerm("details")
)

func violationFrom(p *Policy, el *ast.Term) (Violation, error) {
	obj, ok := el.Value.(ast.Object)
	if !ok {
		return Violation{}, fmt.Errorf("policy %s: violation element %s is not an object; use {\"msg\": msg, \"field\": path, \"details\": {...}}", p.Name, el)
	}
	v := Violation{Policy: p.Name, Action: p.Action()}
	msg, ok := stringAt(obj, keyMsg)
	if !ok {
		return Violation{}, fmt.Errorf("policy %s: violation %s has no string \"msg\"", p.Name, el)
	}
	v.Message = msg
	if f := obj.Get(keyField); f != nil {
		s, ok := f.Value.(ast.String)
		if !ok {
			return Violation{}, fmt.Errorf("policy %s: violation field must be a string path such as spec.limits.cpu, got %s", p.Name, f)
		}
		v.Field = string(s)
	}
	if d := obj.Get(keyDetails); d != nil {
		details, err := ast.JSON(d.Value)
		if err != nil {
			return Violation{}, fmt.Errorf("policy %s: violation details: %w", p.Name, err)
		}
		m, ok := details.(map[string]any)
		if !ok {
			return Violation{}, fmt.Errorf("policy %s: violation details must be an object, got %s", p.Name, d)
		}
		v.Details = m
	}
	return v, nil
}

func stringAt(obj ast.Object, key *ast.Term) (string, bool) {
	t := obj.Get(key)
	if t == nil {
		return "", false
	}
	s, ok := t.Value.(ast.String)
	return string(s), ok
}
