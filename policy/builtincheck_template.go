package policy

import (
	"bytes"
	"fmt"
	"math"
	"strings"
	"text/template"
	"text/template/parse"

	"github.com/open-policy-agent/opa/v1/ast"
	"github.com/open-policy-agent/opa/v1/topdown"
	"github.com/open-policy-agent/opa/v1/topdown/builtins"
)

// templateActionSteps weighs one template action in MaxBuiltinSteps: text/template runs an action in about
// 0.2 µs, some thirty times the steps of the other checks.
const templateActionSteps = 30

// templateNodeBytes is allocated per value of vars, which OPA converts to Go values through JSON.
const templateNodeBytes = 256

// boundedWriter collects output up to limit bytes and refuses more.
type boundedWriter struct {
	buf      bytes.Buffer
	limit    int
	exceeded bool
}

func (w *boundedWriter) Write(p []byte) (int, error) {
	if w.buf.Len()+len(p) > w.limit {
		w.exceeded = true
		return 0, fmt.Errorf("output exceeds %d bytes", w.limit)
	}
	return w.buf.Write(p)
}

// renderTemplateBounded is strings.render_template(template, vars) with the result bounded. Nested range
// actions multiply the output, so its size is only known once rendered, and it is rendered into a buffer
// that refuses to grow past MaxBuiltinStringBytes; before that, the work of the template's actions is
// estimated from its range nesting and the largest collection or integer in vars, since ranges that print
// nothing would loop without filling the buffer. As OPA's, it renders a Go text/template over the JSON
// form of vars and prints missing values as <undefined>.
func renderTemplateBounded(bctx topdown.BuiltinContext, operands []*ast.Term, iter func(*ast.Term) error) error {
	src, err := builtins.StringOperand(operands[0].Value, 1)
	if err != nil {
		return err
	}
	obj, err := builtins.ObjectOperand(operands[1].Value, 2)
	if err != nil {
		return err
	}
	limit := func(le *BuiltinLimitError) error {
		le.Builtin = ast.RenderTemplate.Name
		return haltLimit(bctx, le)
	}
	m := measureJSON(obj, false, 0, 0)
	if le := memoryLimit(satAdd(satMul(satAdd(m.n, int64(len(src))), marshalBytes), satMul(m.nodes, templateNodeBytes))); le != nil {
		return limit(le)
	}
	tmpl, err := template.New("template").Parse(string(src))
	if err != nil {
		return err
	}
	if le := stepsLimit(satMul(templateWork(tmpl, dataBound(obj)), templateActionSteps)); le != nil {
		return limit(le)
	}
	var vars map[string]any
	if err := ast.As(obj, &vars); err != nil {
		return err
	}
	out := &boundedWriter{limit: MaxBuiltinStringBytes}
	if err := tmpl.Execute(out, vars); err != nil {
		if out.exceeded {
			return limit(&BuiltinLimitError{Limit: MaxBuiltinStringBytes, Unit: UnitBytes})
		}
		return err
	}
	return iter(ast.StringTerm(strings.ReplaceAll(out.buf.String(), "<no value>", "<undefined>")))
}

// dataBound returns the most iterations a range over a value of v can make: the length of its largest
// collection, or its largest integer (Go templates range over integers).
func dataBound(v ast.Value) int64 {
	var bound int64 = 1
	var walk func(v ast.Value)
	walk = func(v ast.Value) {
		switch x := v.(type) {
		case ast.Number:
			if i, ok := x.Int64(); ok {
				bound = max(bound, absInt(i))
			} else if _, mag, ok := numberShape(x); ok && mag > 18 {
				bound = math.MaxInt64
			}
		case *ast.Array:
			bound = max(bound, int64(x.Len()))
			x.Foreach(func(t *ast.Term) { walk(t.Value) })
		case ast.Set:
			bound = max(bound, int64(x.Len()))
			x.Foreach(func(t *ast.Term) { walk(t.Value) })
		case ast.Object:
			bound = max(bound, int64(x.Len()))
			x.Foreach(func(_, t *ast.Term) { walk(t.Value) })
		}
	}
	walk(v)
	return bound
}

// templateWork estimates how many actions executing t runs when no range iterates more than bound
// times (or an integer literal in its pipeline). A template that defines or calls named templates may
// recurse, so its work is unbounded.
func templateWork(t *template.Template, bound int64) int64 {
	if len(t.Templates()) > 1 || t.Tree == nil {
		return math.MaxInt64
	}
	return listWork(t.Tree.Root, 1, bound)
}

func listWork(l *parse.ListNode, mult, bound int64) int64 {
	if l == nil {
		return 0
	}
	var w int64
	for _, n := range l.Nodes {
		w = satAdd(w, mult)
		switch x := n.(type) {
		case *parse.RangeNode:
			each := satMul(mult, max(bound, pipeInts(x.Pipe)))
			w = satAdd(w, satAdd(each, satAdd(listWork(x.List, each, bound), listWork(x.ElseList, mult, bound))))
		case *parse.IfNode:
			w = satAdd(w, satAdd(listWork(x.List, mult, bound), listWork(x.ElseList, mult, bound)))
		case *parse.WithNode:
			w = satAdd(w, satAdd(listWork(x.List, mult, bound), listWork(x.ElseList, mult, bound)))
		case *parse.TemplateNode:
			return math.MaxInt64
		}
	}
	return w
}

// pipeInts returns the largest integer literal in a pipeline.
func pipeInts(p *parse.PipeNode) int64 {
	var n int64
	if p == nil {
		return 0
	}
	for _, c := range p.Cmds {
		for _, a := range c.Args {
			if num, ok := a.(*parse.NumberNode); ok {
				if num.IsInt {
					n = max(n, absInt(num.Int64))
				} else {
					n = math.MaxInt64
				}
			}
		}
	}
	return n
}
