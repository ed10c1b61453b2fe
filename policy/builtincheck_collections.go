package policy

import (
	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
	"github.com/open-policy-agent/opa/v1/topdown/builtins"
)

// Estimated allocations of the document builtins: a copied object or set entry, and a JSON patch
// operation on OPA's edit tree.
const (
	nodeBytes  = 192
	patchBytes = 512
	// walkNodeBytes is allocated per node walk yields: the [path, value] pair and the copy of the path.
	walkNodeBytes = 448
)

// elementsOf returns the check of a builtin whose result has at most as many elements as the collections
// among the given operands together (set and array operations, object.keys, sort, casts).
func elementsOf(positions ...int) sizeCheck {
	return func(operands []*ast.Term) *BuiltinLimitError {
		var n int64
		for _, i := range positions {
			if l, ok := collectionLen(operands[i].Value); ok {
				n = satAdd(n, l)
			}
		}
		return elementsLimit(n)
	}
}

// nestedElements returns the check of a builtin whose result has at most as many elements as the
// collections inside its first operand (array.flatten, intersection, union).
func nestedElements(operands []*ast.Term) *BuiltinLimitError {
	var n int64
	each(operands[0].Value, func(t *ast.Term) {
		l, ok := collectionLen(t.Value)
		if !ok {
			l = 1
		}
		n = satAdd(n, l)
	})
	return elementsLimit(n)
}

// each calls f on each element of an array or set.
func each(v ast.Value, f func(*ast.Term)) {
	switch c := v.(type) {
	case *ast.Array:
		c.Foreach(f)
	case ast.Set:
		c.Foreach(f)
	}
}

// objectEntries counts the entries of v and of the objects nested in it through objects only: what
// object.union and object.union_n copy. It stops counting past MaxBuiltinArrayLength.
func objectEntries(v ast.Value) int64 {
	obj, ok := v.(ast.Object)
	if !ok {
		return 0
	}
	n := int64(obj.Len())
	obj.Until(func(_, t *ast.Term) bool {
		n = satAdd(n, objectEntries(t.Value))
		return n > MaxBuiltinArrayLength
	})
	return n
}

// checkObjectUnion bounds object.union(a, b).
func checkObjectUnion(operands []*ast.Term) *BuiltinLimitError {
	return elementsLimit(satAdd(objectEntries(operands[0].Value), objectEntries(operands[1].Value)))
}

// checkObjectUnionN bounds object.union_n(objects).
func checkObjectUnionN(operands []*ast.Term) *BuiltinLimitError {
	var n int64
	each(operands[0].Value, func(t *ast.Term) { n = satAdd(n, objectEntries(t.Value)) })
	return elementsLimit(n)
}

// docNodes counts the values in v, stopping past limit, and returns the deepest nesting seen.
func docNodes(v ast.Value, limit int64) (nodes, depth int64) {
	var walk func(v ast.Value, d int64)
	walk = func(v ast.Value, d int64) {
		if nodes > limit {
			return
		}
		nodes++
		depth = max(depth, d)
		switch x := v.(type) {
		case *ast.Array:
			x.Until(func(t *ast.Term) bool { walk(t.Value, d+1); return nodes > limit })
		case ast.Set:
			x.Until(func(t *ast.Term) bool { walk(t.Value, d+1); return nodes > limit })
		case ast.Object:
			x.Until(func(k, t *ast.Term) bool { walk(t.Value, d+1); return nodes > limit })
		}
	}
	walk(v, 0)
	return nodes, depth
}

// pathSegments counts the segments of json.filter and json.remove paths ("a/b/c" strings or arrays).
func pathSegments(v ast.Value) int64 {
	var n int64
	each(v, func(t *ast.Term) {
		switch p := t.Value.(type) {
		case ast.String:
			n = satAdd(n, int64(len(p))/2+1)
		case *ast.Array:
			n = satAdd(n, int64(p.Len()))
		}
	})
	return n
}

// checkJSONFilter bounds json.filter and json.remove: the result copies at most the document, and the
// paths are built into a tree first.
func checkJSONFilter(operands []*ast.Term) *BuiltinLimitError {
	nodes, _ := docNodes(operands[0].Value, MaxBuiltinAllocBytes/nodeBytes)
	return memoryLimit(satMul(satAdd(nodes, pathSegments(operands[1].Value)), nodeBytes))
}

// checkJSONPatch bounds json.patch(doc, operations): each "copy" may duplicate the whole document so far,
// and each operation edits a tree of the document's size.
func checkJSONPatch(operands []*ast.Term) *BuiltinLimitError {
	ops, ok := operands[1].Value.(*ast.Array)
	if !ok {
		return nil
	}
	limit := int64(MaxBuiltinAllocBytes / nodeBytes)
	size, _ := docNodes(operands[0].Value, limit)
	copyOp := ast.StringTerm("copy")
	ops.Foreach(func(t *ast.Term) {
		op, ok := t.Value.(ast.Object)
		if !ok {
			return
		}
		if v := op.Get(ast.StringTerm("value")); v != nil {
			n, _ := docNodes(v.Value, limit)
			size = satAdd(size, n)
		}
		if o := op.Get(ast.StringTerm("op")); o != nil && o.Equal(copyOp) {
			size = satMul(size, 2)
		}
	})
	return memoryLimit(satAdd(satMul(size, nodeBytes), satMul(int64(ops.Len()), patchBytes)))
}

// checkWalk bounds walk(x): it yields every node of x with a copy of its path.
func checkWalk(operands []*ast.Term) *BuiltinLimitError {
	nodes, depth := docNodes(operands[0].Value, MaxBuiltinAllocBytes/walkNodeBytes)
	return memoryLimit(satMul(nodes, satAdd(walkNodeBytes, satMul(depth, 16))))
}

// checkReachable bounds graph.reachable(graph, initial) (see reachableBounded): the result has at most the
// graph's vertices, and each edge is followed once.
func checkReachable(operands []*ast.Term) *BuiltinLimitError {
	graph, ok := operands[0].Value.(ast.Object)
	if !ok {
		return nil
	}
	var edges int64
	graph.Foreach(func(_, out *ast.Term) {
		n, _ := collectionLen(out.Value)
		edges = satAdd(edges, n)
	})
	roots, _ := collectionLen(operands[1].Value)
	return elementsLimit(satAdd(satAdd(edges, int64(graph.Len())), roots))
}

// checkCIDRContainsMatches bounds net.cidr_contains_matches(cidrs, cidrs_or_ips): every pair is tested
// and each match is an element of the result.
func checkCIDRContainsMatches(operands []*ast.Term) *BuiltinLimitError {
	count := func(v ast.Value) int64 {
		if n, ok := collectionLen(v); ok {
			return n
		}
		return 1
	}
	return elementsLimit(satMul(count(operands[0].Value), count(operands[1].Value)))
}

// checkCIDRMerge bounds net.cidr_merge: a merged range splits into at most 2·128 CIDRs (IPv6).
func checkCIDRMerge(operands []*ast.Term) *BuiltinLimitError {
	n, ok := collectionLen(operands[0].Value)
	if !ok {
		return nil
	}
	return memoryLimit(satMul(satMul(n, 256), entryBytes))
}

// checkObjectSubset bounds object.subset(super, sub): an array sub is searched in an array super
// position by position, every element of sub against every element of super.
func checkObjectSubset(operands []*ast.Term) *BuiltinLimitError {
	super, ok1 := operands[0].Value.(*ast.Array)
	sub, ok2 := operands[1].Value.(*ast.Array)
	if !ok1 || !ok2 {
		return nil
	}
	return stepsLimit(satMul(int64(super.Len()), int64(sub.Len())))
}

// checkAffixMatch bounds strings.any_prefix_match and strings.any_suffix_match, which copy both
// collections of strings into slices (and reverse every string for suffixes) and sort them.
func checkAffixMatch(operands []*ast.Term) *BuiltinLimitError {
	var n, bytes int64
	for _, op := range operands[:2] {
		if l, ok := stringLen(op); ok {
			n, bytes = n+1, satAdd(bytes, l)
			continue
		}
		each(op.Value, func(t *ast.Term) {
			l, _ := stringLen(t)
			n, bytes = n+1, satAdd(bytes, l)
		})
	}
	return memoryLimit(satAdd(satMul(n, 32), bytes))
}

// checkURLQueryDecodeObject bounds urlquery.decode_object: one object entry and array per parameter.
func checkURLQueryDecodeObject(operands []*ast.Term) *BuiltinLimitError {
	s, ok := operands[0].Value.(ast.String)
	if !ok {
		return nil
	}
	var params int64 = 1
	for i := 0; i < len(s); i++ {
		if s[i] == '&' || s[i] == ';' {
			params++
		}
	}
	return memoryLimit(satAdd(satMul(params, 2*entryBytes), satMul(int64(len(s)), 4)))
}

// checkURLQueryEncodeObject bounds urlquery.encode_object: each byte may be escaped to three.
func checkURLQueryEncodeObject(operands []*ast.Term) *BuiltinLimitError {
	m := measureJSON(operands[0].Value, false, 0, 0)
	return memoryLimit(satAdd(satMul(m.n, 8), satMul(m.nodes, entryBytes)))
}

// reachableBounded is graph.reachable(graph, initial) in linear time: the vertices that have an entry in
// graph and are reachable from initial. OPA's implementation queues a vertex again for every edge into
// it met before the vertex is reached, so a chain where each vertex points to the next two queues
// Fibonacci-many copies; this one marks vertices when they are first queued.
func reachableBounded(_ topdown.BuiltinContext, operands []*ast.Term, iter func(*ast.Term) error) error {
	graph, err := builtins.ObjectOperand(operands[0].Value, 1)
	if err != nil {
		return err
	}
	var queue []*ast.Term
	switch initial := operands[1].Value.(type) {
	case *ast.Array, ast.Set:
		each(initial, func(t *ast.Term) { queue = append(queue, t) })
	default:
		return builtins.NewOperandTypeErr(2, initial, "{array, set}")
	}
	queued := ast.NewSet(queue...)
	reached := ast.NewSet()
	for len(queue) > 0 {
		node := queue[0]
		queue = queue[1:]
		edges := graph.Get(node)
		if edges == nil {
			continue
		}
		reached.Add(node)
		each(edges.Value, func(next *ast.Term) {
			if !queued.Contains(next) {
				queued.Add(next)
				queue = append(queue, next)
			}
		})
	}
	return iter(ast.NewTerm(reached))
}
