// Package layers states the module's architecture as data (which top-level folder may import
// which, and which controller packages no other controller may import) and checks a package graph
// against it. Its test runs the check over `go list` of the whole module, so `make test` and
// `make lint` fail when a folder-level cycle or an upward import comes back. It reads import
// lists only; it changes nothing.
package layers

import (
	"fmt"
	"slices"
	"strings"
)

// Rank orders the top-level folders from the bottom layer up. A package may import a package of
// another folder only when that folder's rank is lower, so no two folders can import each other
// and no folder-level cycle can form. Folders of equal rank are peers that must not import each
// other (controllers and webhooks, for example).
var Rank = map[string]int{
	// Types and leaf libraries: no imports from the rest of the module.
	"api": 0, "config": 0, "jsonobject": 0, "metrics": 0, "testbed": 0, "fileinput": 0,
	// Pure libraries over the API types.
	"requirements": 1, "tenancy": 1, "runtimevalidation": 1, "crdvalidation": 1, "convert": 1,
	// The policy engine and the cloud-provider seam.
	"policy": 2, "cloudprovider": 2,
	// Controllers, admission webhooks and certificates: peers.
	"controllers": 3, "webhooks": 3, "certs": 3,
	// Cloud providers, above the seam and the controllers' libraries they use.
	"providers": 4,
	// Assemblies: the operator (names no provider) and the offline admission check.
	"operator": 5, "admissioncheck": 5,
	// The in-process local cluster of `make run`.
	"localrun": 6,
	// Binaries, end-to-end tests, test support and tools: nothing imports them.
	"cmd": 7, "e2e": 7, "testsupport": 7, "hack": 7,
}

// ControllerPackages are the packages under controllers/ that each export a controller wired by
// controllers.Register. Only the wiring package (controllers) and packages inside a controller's
// own folder may import one: what several controllers share lives in a library package
// (controllers/state, fieldindex, podpredicates, ...).
var ControllerPackages = []string{
	"audit", "capacitybuffer", "consolidatable", "disruption", "drift", "expiration", "garbagecollection", "nodeclaim",
	"nodepool", "nodepoolhash", "podevents", "podmetrics", "policysync", "provisioning", "staticpool",
	"termination",
}

// Package is one package of the module: its path relative to the module root and the module-local
// packages its non-test files import, also relative to the module root.
type Package struct {
	Path    string
	Imports []string
}

// Violation is one import that breaks the layering.
type Violation struct {
	From, To string
	Reason   string
}

func (v Violation) String() string { return fmt.Sprintf("%s imports %s: %s", v.From, v.To, v.Reason) }

// Check returns every import of pkgs that breaks Rank or ControllerPackages, sorted.
func Check(pkgs []Package) []Violation {
	var out []Violation
	for _, p := range pkgs {
		from := top(p.Path)
		for _, imp := range p.Imports {
			to := top(imp)
			if v, bad := checkFolders(p.Path, imp, from, to); bad {
				out = append(out, v)
				continue
			}
			if v, bad := checkControllers(p.Path, imp); bad {
				out = append(out, v)
			}
		}
	}
	slices.SortFunc(out, func(a, b Violation) int {
		return strings.Compare(a.String(), b.String())
	})
	return out
}

func checkFolders(pkg, imp, from, to string) (Violation, bool) {
	if from == to {
		return Violation{}, false
	}
	rf, okf := Rank[from]
	rt, okt := Rank[to]
	switch {
	case !okf:
		return Violation{pkg, imp, fmt.Sprintf("folder %q has no rank in hack/layers.Rank: add it", from)}, true
	case !okt:
		return Violation{pkg, imp, fmt.Sprintf("folder %q has no rank in hack/layers.Rank: add it", to)}, true
	case rt >= rf:
		return Violation{pkg, imp, fmt.Sprintf("%s (rank %d) may import only folders of lower rank, not %s (rank %d)", from, rf, to, rt)}, true
	}
	return Violation{}, false
}

func checkControllers(pkg, imp string) (Violation, bool) {
	name, ok := strings.CutPrefix(imp, "controllers/")
	if !ok || !slices.Contains(ControllerPackages, name) {
		return Violation{}, false
	}
	if pkg == "controllers" || pkg == imp || strings.HasPrefix(pkg, imp+"/") || top(pkg) != "controllers" {
		return Violation{}, false
	}
	return Violation{pkg, imp, "a controller package is imported only by controllers (the wiring) and its own subpackages; move what is shared into a library package"}, true
}

func top(path string) string {
	first, _, _ := strings.Cut(path, "/")
	return first
}
