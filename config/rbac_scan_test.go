package config_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"

	cmapi "github.com/cert-manager/cert-manager/pkg/apis/certmanager/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	joinerscheme "github.com/joiner-dev/joiner/api/scheme"
)

// This file reads the controller's Go code the way the apiserver sees it: every call it makes
// through a controller-runtime client, as an RBAC verb on a resource. rbac_needs_test.go holds it
// against the table of grants.

const (
	// controllerBinary is the program that runs under the ServiceAccount the RBAC is for; the
	// scan covers the Joiner packages it is built from.
	controllerBinary = "./cmd/joiner"
	modulePath       = "github.com/joiner-dev/joiner"
	clientPkg        = "sigs.k8s.io/controller-runtime/pkg/client"
)

// clientCall is one call through a controller-runtime client: what it asks of the apiserver and
// where it is. A call whose object has an interface type the scan cannot follow has an empty
// resource and the static type in objType.
type clientCall struct {
	group, resource, verb string
	// file is the file's path from the repository root; fn the enclosing function, as
	// "Func" or "Type.Method".
	file, fn string
	line     int
	objType  string
}

func (c clientCall) String() string {
	return fmt.Sprintf("%s:%d (%s): %s %s", c.file, c.line, c.fn, c.verb, groupResource(c.group, c.resource))
}

// codeScan is what the scan found in the controller's packages.
type codeScan struct {
	calls []clientCall
	// funcs holds every function declared, as "file:Func" or "file:Type.Method".
	funcs map[string]bool
	// refs holds, per function ("file:fn"), the resources whose Go types it uses (group/resource).
	refs map[string]map[string]bool
}

var (
	scanOnce   sync.Once
	scanResult *codeScan
	scanErr    error
)

// scanCode scans the controller's packages once per test binary.
func scanCode(t *testing.T) *codeScan {
	t.Helper()
	scanOnce.Do(func() { scanResult, scanErr = runScan() })
	if scanErr != nil {
		t.Fatalf("scan the controller's Go code: %v", scanErr)
	}
	return scanResult
}

// listedPackage is the part of `go list -json` the scan uses.
type listedPackage struct {
	ImportPath string
	Dir        string
	Export     string
	GoFiles    []string
	CgoFiles   []string
	Module     *struct{ Path string }
}

func runScan() (*codeScan, error) {
	root, err := filepath.Abs(repoRoot)
	if err != nil {
		return nil, err
	}
	// -export compiles (or takes from the build cache) every dependency, so the packages can be
	// type-checked from source against their imports' export data.
	cmd := exec.Command("go", "list", "-deps", "-export", "-json=ImportPath,Dir,Export,GoFiles,CgoFiles,Module", controllerBinary)
	cmd.Dir = root
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list %s: %v\n%s", controllerBinary, err, stderr.String())
	}
	exports := map[string]string{}
	var own []listedPackage
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("decode go list output: %w", err)
		}
		exports[p.ImportPath] = p.Export
		if p.Module != nil && p.Module.Path == modulePath {
			own = append(own, p)
		}
	}
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok || f == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	kinds, err := knownKinds()
	if err != nil {
		return nil, err
	}
	s := &codeScan{funcs: map[string]bool{}, refs: map[string]map[string]bool{}}
	for _, p := range own {
		if len(p.CgoFiles) != 0 {
			return nil, fmt.Errorf("%s: cgo files are not scanned", p.ImportPath)
		}
		if err := s.scanPackage(fset, imp, kinds, root, p); err != nil {
			return nil, err
		}
	}
	sort.Slice(s.calls, func(i, j int) bool {
		a, b := s.calls[i], s.calls[j]
		if a.file != b.file {
			return a.file < b.file
		}
		return a.line < b.line
	})
	return s, nil
}

// knownKinds maps "pkgpath.TypeName" of every API type the controller's clients know to its
// group and resource (list types to the resource they list).
func knownKinds() (map[string]schema.GroupResource, error) {
	sch, err := joinerscheme.New()
	if err != nil {
		return nil, err
	}
	if err := cmapi.AddToScheme(sch); err != nil {
		return nil, err
	}
	out := map[string]schema.GroupResource{}
	for gvk, typ := range sch.AllKnownTypes() {
		if gvk.Version == runtime.APIVersionInternal || strings.HasPrefix(typ.PkgPath(), "k8s.io/apimachinery/") {
			continue // meta types (options, status, watch events) are registered in every group
		}
		kind := strings.TrimSuffix(gvk.Kind, "List")
		plural, _ := meta.UnsafeGuessKindToResource(gvk.GroupVersion().WithKind(kind))
		out[typ.PkgPath()+"."+typ.Name()] = plural.GroupResource()
	}
	return out, nil
}

// scanPackage type-checks one package from source and records its client calls, functions and
// the API types each function uses.
func (s *codeScan) scanPackage(fset *token.FileSet, imp types.Importer, kinds map[string]schema.GroupResource, root string, p listedPackage) error {
	var files []*ast.File
	for _, name := range p.GoFiles {
		f, err := parser.ParseFile(fset, filepath.Join(p.Dir, name), nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files = append(files, f)
	}
	info := &types.Info{
		Types:      map[ast.Expr]types.TypeAndValue{},
		Defs:       map[*ast.Ident]types.Object{},
		Uses:       map[*ast.Ident]types.Object{},
		Selections: map[*ast.SelectorExpr]*types.Selection{},
	}
	if _, err := (&types.Config{Importer: imp}).Check(p.ImportPath, fset, files, info); err != nil {
		return fmt.Errorf("type-check %s: %w", p.ImportPath, err)
	}
	pkg := &scannedPackage{fset: fset, info: info, kinds: kinds, root: root, decls: map[types.Object]*ast.FuncDecl{}}
	for _, f := range files {
		for _, d := range f.Decls {
			if fd, ok := d.(*ast.FuncDecl); ok {
				pkg.decls[info.Defs[fd.Name]] = fd
			}
		}
	}
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			file, fn := pkg.relFile(fd.Pos()), funcName(fd)
			key := file + ":" + fn
			s.funcs[key] = true
			refs := map[string]bool{}
			ast.Inspect(fd.Body, func(n ast.Node) bool {
				if e, ok := n.(ast.Expr); ok {
					if gr, ok := pkg.resourceOf(info.Types[e].Type); ok {
						refs[gr.Group+"/"+gr.Resource] = true
					}
				}
				if call, ok := n.(*ast.CallExpr); ok {
					s.calls = append(s.calls, pkg.clientCalls(fd, call, file, fn)...)
				}
				return true
			})
			s.refs[key] = refs
		}
	}
	return nil
}

type scannedPackage struct {
	fset  *token.FileSet
	info  *types.Info
	kinds map[string]schema.GroupResource
	root  string
	// decls are the package's function declarations by their object, to follow a parameter to
	// the arguments callers pass.
	decls map[types.Object]*ast.FuncDecl
}

func (p *scannedPackage) relFile(pos token.Pos) string {
	rel, err := filepath.Rel(p.root, p.fset.Position(pos).Filename)
	if err != nil {
		return p.fset.Position(pos).Filename
	}
	return filepath.ToSlash(rel)
}

func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	if s, ok := t.(*ast.StarExpr); ok {
		t = s.X
	}
	if ix, ok := t.(*ast.IndexExpr); ok {
		t = ix.X
	}
	if id, ok := t.(*ast.Ident); ok {
		return id.Name + "." + fd.Name.Name
	}
	return fd.Name.Name
}

// resourceOf returns the API resource of a (pointer to a) Go API type, or of its list type.
func (p *scannedPackage) resourceOf(t types.Type) (schema.GroupResource, bool) {
	if t == nil {
		return schema.GroupResource{}, false
	}
	if ptr, ok := t.(*types.Pointer); ok {
		t = ptr.Elem()
	}
	named, ok := t.(*types.Named)
	if !ok || named.Obj().Pkg() == nil {
		return schema.GroupResource{}, false
	}
	gr, ok := p.kinds[named.Obj().Pkg().Path()+"."+named.Obj().Name()]
	return gr, ok
}

// Verbs of the controller-runtime client methods, by the interface that declares them.
var clientVerbs = map[string]map[string]string{
	"Reader":            {"Get": "get", "List": "list"},
	"Writer":            {"Create": "create", "Update": "update", "Patch": "patch", "Apply": "patch", "Delete": "delete", "DeleteAllOf": "deletecollection"},
	"SubResourceReader": {"Get": "get"},
	"SubResourceWriter": {"Create": "create", "Update": "update", "Patch": "patch", "Apply": "patch"},
}

// clientCalls returns the client call call makes (one per object type it can carry), or none
// when it is not a controller-runtime client call.
func (p *scannedPackage) clientCalls(fd *ast.FuncDecl, call *ast.CallExpr, file, fn string) []clientCall {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return nil
	}
	m, ok := p.info.Uses[sel.Sel].(*types.Func)
	if !ok || m.Pkg() == nil || m.Pkg().Path() != clientPkg {
		return nil
	}
	recv := m.Type().(*types.Signature).Recv()
	if recv == nil {
		return nil
	}
	iface, ok := recv.Type().(*types.Named)
	if !ok {
		return nil
	}
	verb, ok := clientVerbs[iface.Obj().Name()][m.Name()]
	// The object is the second argument (after the context), except for Reader.Get(ctx, key, obj).
	objArg := 1
	if iface.Obj().Name() == "Reader" && m.Name() == "Get" {
		objArg = 2
	}
	if !ok || len(call.Args) <= objArg {
		return nil
	}
	base := clientCall{verb: verb, file: file, fn: fn, line: p.fset.Position(call.Pos()).Line}
	sub := ""
	if strings.HasPrefix(iface.Obj().Name(), "SubResource") {
		if sub = subresourceName(sel.X); sub == "" {
			base.objType = "subresource of " + types.ExprString(sel.X)
			return []clientCall{base}
		}
	}
	var out []clientCall
	for _, t := range p.objectTypes(fd, call.Args[objArg], 0) {
		c := base
		gr, ok := p.resourceOf(t)
		if !ok {
			c.objType = types.TypeString(t, nil)
			out = append(out, c)
			continue
		}
		c.group, c.resource = gr.Group, gr.Resource
		if sub != "" {
			c.resource += "/" + sub
		}
		out = append(out, c)
	}
	return out
}

// subresourceName returns "status" for x.Status() and NAME for x.SubResource("NAME").
func subresourceName(x ast.Expr) string {
	call, ok := x.(*ast.CallExpr)
	if !ok {
		return ""
	}
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok {
		return ""
	}
	switch sel.Sel.Name {
	case "Status":
		return "status"
	case "SubResource":
		if len(call.Args) == 1 {
			if lit, ok := call.Args[0].(*ast.BasicLit); ok && lit.Kind == token.STRING {
				name, _ := strconv.Unquote(lit.Value)
				return name
			}
		}
	}
	return ""
}

// objectTypes returns the static types the object argument arg can have. An interface-typed
// parameter of the enclosing function is followed to the arguments its callers in the package
// pass (a few levels deep); anything else is returned as it is.
func (p *scannedPackage) objectTypes(fd *ast.FuncDecl, arg ast.Expr, depth int) []types.Type {
	t := p.info.Types[arg].Type
	if _, isIface := t.Underlying().(*types.Interface); !isIface || depth > 3 {
		return []types.Type{t}
	}
	id, ok := ast.Unparen(arg).(*ast.Ident)
	if !ok {
		return []types.Type{t}
	}
	idx := paramIndex(fd, p.info.Uses[id])
	if idx < 0 {
		return []types.Type{t}
	}
	callee := p.info.Defs[fd.Name]
	var out []types.Type
	for _, decl := range p.decls {
		if decl.Body == nil {
			continue
		}
		ast.Inspect(decl.Body, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok || idx >= len(call.Args) {
				return true
			}
			var name *ast.Ident
			switch f := call.Fun.(type) {
			case *ast.Ident:
				name = f
			case *ast.SelectorExpr:
				name = f.Sel
			}
			if name != nil && p.info.Uses[name] == callee {
				out = append(out, p.objectTypes(decl, call.Args[idx], depth+1)...)
			}
			return true
		})
	}
	if len(out) == 0 {
		return []types.Type{t}
	}
	return out
}

// paramIndex returns the position of obj among fd's parameters, or -1.
func paramIndex(fd *ast.FuncDecl, obj types.Object) int {
	if obj == nil {
		return -1
	}
	i := 0
	for _, field := range fd.Type.Params.List {
		if len(field.Names) == 0 {
			i++
			continue
		}
		for _, n := range field.Names {
			if n.Name == obj.Name() && n.Pos() == obj.Pos() {
				return i
			}
			i++
		}
	}
	return -1
}
