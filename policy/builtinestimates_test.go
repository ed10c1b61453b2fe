package policy

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
)

// checkOf returns the size check in front of a capped builtin, or a check calling its bounded
// implementation when it has no check.
func checkOf(name string) sizeCheck {
	if c := builtinBounds[name].check; c != nil {
		return c
	}
	return func(operands []*ast.Term) *BuiltinLimitError {
		return limitError(callBuiltin(name, operands).err)
	}
}

// largestAllowed returns the largest n up to the probe's limit whose arguments check accepts (within a
// quarter: an estimate a third too low still shows), and whether some n was refused.
func largestAllowed(p probe, check sizeCheck) (n int, refused bool) {
	allowed := func(n int) bool { return check(p.args(n)) == nil }
	lo, hi := 0, 0
	for n := 1 << 6; ; n *= 4 {
		n = min(n, p.limit())
		if !allowed(n) {
			hi = n
			break
		}
		lo = n
		if n == p.limit() {
			return lo, false
		}
	}
	for hi-lo > max(lo/4, 1) {
		mid := lo + (hi-lo)/2
		if allowed(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, true
}

// maxCallDuration bounds one builtin call the checks allow: well within the 2 s evaluation deadline and
// the webhook's timeout, with room for a loaded test machine.
const maxCallDuration = time.Second

// TestCappedBuiltinsStayWithinBounds: for each probe of each capped builtin, the largest arguments its
// check accepts make a call that allocates at most MaxBuiltinAllocBytes (so the estimates are upper
// bounds) and finishes within maxCallDuration; the smallest arguments it refuses stop the call with a
// BuiltinLimitError naming the builtin, the bound and the fix, before the call allocates.
func TestCappedBuiltinsStayWithinBounds(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: calls every capped builtin at its bounds; make test runs it")
	}
	const slack = 2 << 20
	for _, name := range sortedNames(classCapped) {
		for _, p := range builtinProbes[name] {
			n, refused := largestAllowed(p, checkOf(name))
			// The first call with these arguments: it compiles (and caches) any pattern.
			r := callBuiltin(name, p.args(n))
			t.Logf("%s (%s): largest allowed n=%d (refused above: %v): %d bytes in %s", name, p.name, n, refused, r.alloc, r.duration)
			if r.alloc > MaxBuiltinAllocBytes+slack {
				t.Errorf("%s (%s): allowed at n=%d, allocated %d bytes, over MaxBuiltinAllocBytes: its estimate is too low", name, p.name, n, r.alloc)
			}
			if r.duration > maxCallDuration {
				t.Errorf("%s (%s): allowed at n=%d, took %s", name, p.name, n, r.duration)
			}
			if le := limitError(r.err); le != nil {
				t.Errorf("%s (%s): the check allowed n=%d but the call failed: %v", name, p.name, n, r.err)
			}
			if refused {
				checkRefusal(t, name, p, n)
			}
		}
	}
}

// checkRefusal calls name just past the largest n its check allows and expects a cheap, clear refusal.
func checkRefusal(t *testing.T, name string, p probe, allowed int) {
	t.Helper()
	n := min(allowed+max(allowed/4, 1), p.limit())
	args := p.args(n)
	if checkOf(name)(args) == nil {
		n, args = p.limit(), p.args(p.limit())
	}
	r := callBuiltin(name, args)
	le := limitError(r.err)
	var halt topdown.Halt
	if le == nil || !errors.As(r.err, &halt) {
		t.Errorf("%s (%s): refused at n=%d, but the call returned %v; want a Halt with a BuiltinLimitError", name, p.name, n, r.err)
		return
	}
	msg := le.Error()
	for _, w := range []string{name + " would ", "at most", builtinLimitFix(name)} {
		if !strings.Contains(msg, w) {
			t.Errorf("%s (%s): refusal %q does not contain %q", name, p.name, msg, w)
		}
	}
	if le.Builtin != name || le.Size <= le.Limit && le.Size != 0 {
		t.Errorf("%s (%s): refusal %+v", name, p.name, le)
	}
	if r.alloc > MaxBuiltinAllocBytes/4 {
		t.Errorf("%s (%s): the refused call allocated %d bytes: the check must run before the call", name, p.name, r.alloc)
	}
}
