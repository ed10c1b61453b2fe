// Package crdvalidation judges custom resources the way a kube-apiserver serving Joiner's CRDs does,
// without a cluster: it reads a request body (pruning unknown fields, coercing metadata), applies the
// schema's defaults, and validates the object against the OpenAPI schema and the CEL rules of its CRD,
// on create and on update. It calls the apiserver's own packages (k8s.io/apiextensions-apiserver
// schema, schema/cel and apiserver/validation), wired as the apiserver wires them, so its errors are
// word for word the apiserver's. It knows nothing of Joiner's webhooks or policies, and never talks to
// a cluster. What depends on a running server is left out: generated names, uids and timestamps, and
// the warnings about finalizer names.
package crdvalidation

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"

	apiextensionsinternal "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	"k8s.io/apiextensions-apiserver/pkg/apiserver/schema/cel"
	structuraldefaulting "k8s.io/apiextensions-apiserver/pkg/apiserver/schema/defaulting"
	apiservervalidation "k8s.io/apiextensions-apiserver/pkg/apiserver/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	celconfig "k8s.io/apiserver/pkg/apis/cel"

	"github.com/joiner-dev/joiner/config/crd"
)

// Schemas holds the kinds of a set of CRDs, one Kind per served version. It is safe for concurrent
// use; each Kind compiles its CEL rules the first time it validates.
type Schemas struct {
	kinds map[schema.GroupVersionKind]*Kind
}

// Joiner returns the Schemas of the CRDs Joiner generates (config/crd/bases, embedded at build time).
// They are read once per process.
func Joiner() (*Schemas, error) {
	return joinerSchemas()
}

var joinerSchemas = sync.OnceValues(func() (*Schemas, error) {
	return Load(crd.Bases, "bases/*.yaml")
})

// Load reads the CustomResourceDefinitions in the files of fsys that match pattern (path.Match
// syntax, such as "bases/*.yaml"); a file may hold several YAML documents.
func Load(fsys fs.FS, pattern string) (*Schemas, error) {
	names, err := fs.Glob(fsys, pattern)
	if err != nil {
		return nil, fmt.Errorf("load CRDs %s: %w", pattern, err)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("load CRDs: no file matches %s", pattern)
	}
	s := &Schemas{kinds: map[schema.GroupVersionKind]*Kind{}}
	for _, name := range names {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, fmt.Errorf("load CRDs: %w", err)
		}
		if err := s.add(name, data); err != nil {
			return nil, fmt.Errorf("load CRDs: %w", err)
		}
	}
	return s, nil
}

// add reads every CRD of one file.
func (s *Schemas) add(name string, data []byte) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for i := 1; ; i++ {
		var def apiextensionsv1.CustomResourceDefinition
		if err := dec.Decode(&def); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return fmt.Errorf("%s document %d: %w", path.Base(name), i, err)
		}
		if def.Kind != "CustomResourceDefinition" {
			continue
		}
		if err := s.addCRD(&def); err != nil {
			return fmt.Errorf("%s: CRD %s: %w", path.Base(name), def.Name, err)
		}
	}
}

// addCRD builds a Kind for each served version of def, as the apiserver's CRD handler builds its
// storage: the structural schema with its defaults pruned, the OpenAPI validator and the status and
// scale subresources.
func (s *Schemas) addCRD(def *apiextensionsv1.CustomResourceDefinition) error {
	if def.Spec.PreserveUnknownFields {
		return fmt.Errorf("preserveUnknownFields is not supported; Joiner's CRDs are structural")
	}
	for _, v := range def.Spec.Versions {
		if !v.Served {
			continue
		}
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			return fmt.Errorf("version %s has no schema", v.Name)
		}
		internal := &apiextensionsinternal.CustomResourceValidation{}
		if err := apiextensionsv1.Convert_v1_CustomResourceValidation_To_apiextensions_CustomResourceValidation(v.Schema, internal, nil); err != nil {
			return fmt.Errorf("version %s: convert the schema: %w", v.Name, err)
		}
		structural, err := structuralschema.NewStructural(internal.OpenAPIV3Schema)
		if err != nil {
			return fmt.Errorf("version %s: the schema is not structural: %w", v.Name, err)
		}
		structural = structural.DeepCopy()
		if err := structuraldefaulting.PruneDefaults(structural); err != nil {
			return fmt.Errorf("version %s: prune defaults: %w", v.Name, err)
		}
		validator, _, err := apiservervalidation.NewSchemaValidator(internal.OpenAPIV3Schema)
		if err != nil {
			return fmt.Errorf("version %s: build the schema validator: %w", v.Name, err)
		}
		k := &Kind{
			GVK:        schema.GroupVersionKind{Group: def.Spec.Group, Version: v.Name, Kind: def.Spec.Names.Kind},
			Resource:   def.Spec.Names.Plural,
			Namespaced: def.Spec.Scope == apiextensionsv1.NamespaceScoped,
			structural: structural,
			validator:  validator,
		}
		if sub := v.Subresources; sub != nil {
			k.hasStatus = sub.Status != nil
			k.scale = sub.Scale
		}
		k.cel = sync.OnceValue(func() *cel.Validator {
			// Compiles every rule of the schema, as the apiserver does once per CRD version.
			return cel.NewValidator(k.structural, true, celconfig.PerCallLimit)
		})
		s.kinds[k.GVK] = k
	}
	return nil
}

// Kind returns the served kind gvk, or false when no CRD serves it.
func (s *Schemas) Kind(gvk schema.GroupVersionKind) (*Kind, bool) {
	k, ok := s.kinds[gvk]
	return k, ok
}

// ServesGroup reports whether a CRD of group is loaded, whatever its kinds and versions.
func (s *Schemas) ServesGroup(group string) bool {
	for gvk := range s.kinds {
		if gvk.Group == group {
			return true
		}
	}
	return false
}

// Kinds returns every served group/version/kind, sorted by group, kind and version.
func (s *Schemas) Kinds() []schema.GroupVersionKind {
	out := make([]schema.GroupVersionKind, 0, len(s.kinds))
	for gvk := range s.kinds {
		out = append(out, gvk)
	}
	sort.Slice(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Kind != b.Kind {
			return a.Kind < b.Kind
		}
		return a.Version < b.Version
	})
	return out
}

// KindsOf lists, as "group/version Kind", the served kinds of group, for messages.
func (s *Schemas) KindsOf(group string) string {
	var names []string
	for _, gvk := range s.Kinds() {
		if gvk.Group == group {
			names = append(names, gvk.GroupVersion().String()+" "+gvk.Kind)
		}
	}
	return strings.Join(slices.Compact(names), ", ")
}
