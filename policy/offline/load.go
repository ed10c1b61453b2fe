// Package offline is the front end of the policy engine for files on disk: it loads ProvisioningPolicy
// manifests and Kubernetes objects from YAML or JSON (for `joiner check` and `joiner policy check`, which
// package admissioncheck runs), writes a check's text and JSON reports, and runs the policies' Rego unit
// tests (`joiner policy test`). It only reads files and formats reports; every verdict comes from package
// policy, through admissioncheck, so a check gives the same result as the admission webhook.
package offline

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"

	"github.com/joiner-dev/joiner/api/joiner/v1alpha1"
	"github.com/joiner-dev/joiner/fileinput"
	"github.com/joiner-dev/joiner/policy"
	"github.com/joiner-dev/joiner/policy/policyobject"
	"sigs.k8s.io/yaml"
)

// ProvisioningPolicy's API group/version and kind, as written in manifests.
const (
	PolicyAPIVersion = "joiner.dev/v1alpha1"
	PolicyKind       = "ProvisioningPolicy"
)

// Object is one Kubernetes object read from a file.
type Object struct {
	// Source locates the object: "path#N" for the N-th document of a file (1-based), with " items[i]"
	// appended for an element of a List, or "-#N" for standard input.
	Source string
	// Content is the object in its unstructured JSON form.
	Content map[string]any
	// File is the file the object was read from ("-" for standard input); Line is the 1-based line of that
	// file where the object's document starts (1 for JSON values).
	File string
	Line int
}

// document is one YAML or JSON document of a file.
type document struct {
	source string // path#N
	file   string // path
	line   int    // 1-based line of the file where the document starts
	text   []byte // YAML text (or JSON, which is YAML)
}

// docSeparator matches a YAML document separator line.
var docSeparator = regexp.MustCompile(`^---\s*(#.*)?$`)

// splitDocuments splits a YAML stream on "---" lines, remembering where each document starts. Documents
// are slices of data; lines may be as long as data (only the file size is limited, by the input layer).
func splitDocuments(name string, data []byte) []document {
	var docs []document
	start, startLine, lineNo, offset := 0, 1, 0, 0
	flush := func(end int) {
		if text := data[start:end]; !blankDocument(text) {
			docs = append(docs, document{line: startLine, text: text})
		}
	}
	for line := range bytes.Lines(data) {
		lineNo++
		end := offset + len(line)
		if docSeparator.Match(bytes.TrimSuffix(line, []byte("\n"))) {
			flush(offset)
			start, startLine = end, lineNo+1
		}
		offset = end
	}
	flush(len(data))
	for i := range docs {
		docs[i].source, docs[i].file = fmt.Sprintf("%s#%d", name, i+1), name
	}
	return docs
}

// blankDocument reports whether a document holds only whitespace and comments. Such documents are
// dropped, so document numbers count only documents with content.
func blankDocument(text []byte) bool {
	for line := range bytes.Lines(text) {
		t := bytes.TrimSpace(line)
		if len(t) > 0 && t[0] != '#' {
			return false
		}
	}
	return true
}

// decodeDocument converts a YAML or JSON document to JSON values, keeping numbers exact (json.Number).
// Documents holding only comments decode to nil.
func decodeDocument(d document) (any, error) {
	js, err := yaml.YAMLToJSONStrict(d.text)
	if err != nil {
		return nil, fmt.Errorf("%s (line %d): not valid YAML or JSON: %w", d.source, d.line, err)
	}
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("%s (line %d): %w", d.source, d.line, err)
	}
	return v, nil
}

// splitJSON splits a stream of JSON values (one object, an array of objects, or concatenated objects).
func splitJSON(name string, data []byte) ([]document, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	var docs []document
	for {
		var raw json.RawMessage
		err := dec.Decode(&raw)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: not valid JSON: %w", name, err)
		}
		if t := bytes.TrimSpace(raw); len(t) > 0 && t[0] == '[' {
			var items []json.RawMessage
			if err := json.Unmarshal(t, &items); err != nil {
				return nil, fmt.Errorf("%s: not valid JSON: %w", name, err)
			}
			for _, it := range items {
				docs = append(docs, document{line: 1, text: it})
			}
			continue
		}
		docs = append(docs, document{line: 1, text: raw})
	}
	for i := range docs {
		docs[i].source, docs[i].file = fmt.Sprintf("%s#%d", name, i+1), name
	}
	return docs, nil
}

// LoadObjects reads objects as LoadObjectsWithOptions does with the default size limit, without
// cancellation, and accepting input with no objects.
func LoadObjects(paths []string, stdin io.Reader) ([]Object, error) {
	return LoadObjectsWithOptions(context.Background(), paths, stdin, LoadOptions{AllowEmpty: true})
}

// LoadObjectsWithOptions reads Kubernetes objects from files, folders (recursively: the regular files named
// *.yaml, *.yml and *.json) and "-" (stdin). Files may hold several YAML documents or JSON values; List
// kinds (kubectl's List and typed lists such as NodePoolList) are flattened into their items. Empty
// documents are skipped. Finding no object at all is a *fileinput.EmptyError naming what was read, unless
// opts.AllowEmpty. Reads stop when ctx is done.
func LoadObjectsWithOptions(ctx context.Context, paths []string, stdin io.Reader, opts LoadOptions) ([]Object, error) {
	var out []Object
	listings, err := readAll(ctx, paths, stdin, opts, objectExts, func(d document) error {
		v, err := decodeDocument(d)
		if err != nil {
			return err
		}
		objs, err := flatten(d.source, v)
		for i := range objs {
			objs[i].File, objs[i].Line = d.file, d.line
		}
		out = append(out, objs...)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("load objects: %w", err)
	}
	if len(out) == 0 && !opts.AllowEmpty {
		return nil, fmt.Errorf("load objects: %w", &fileinput.EmptyError{What: "Kubernetes objects", Listings: listings})
	}
	return out, nil
}

// flatten turns a decoded document into objects, expanding List kinds.
func flatten(source string, v any) ([]Object, error) {
	if v == nil {
		return nil, nil
	}
	obj, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: a document must be a Kubernetes object (a mapping with apiVersion and kind)", source)
	}
	kind, _ := obj["kind"].(string)
	items, isList := obj["items"].([]any)
	if !isList || !strings.HasSuffix(kind, "List") {
		return []Object{{Source: source, Content: obj}}, nil
	}
	out := make([]Object, 0, len(items))
	for i, it := range items {
		m, ok := it.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s: items[%d] of %s is not an object", source, i, kind)
		}
		out = append(out, Object{Source: fmt.Sprintf("%s items[%d]", source, i), Content: m})
	}
	return out, nil
}

// LoadedPolicy is a policy read from a manifest, with where it came from.
type LoadedPolicy struct {
	Policy policy.Policy
	// Source is "path#N", the N-th document of the file.
	Source string
	// RegoLine is the line of the file where spec.rego's first line is, or 0 if unknown.
	RegoLine int
}

// regoBlock finds a `rego: |` (or `>`) block scalar header.
var regoBlock = regexp.MustCompile(`^\s*rego:\s*[|>][-+0-9]*\s*(#.*)?$`)

// LoadPolicies reads policies as LoadPoliciesWithOptions does with the default size limit and without
// cancellation.
func LoadPolicies(path string) ([]LoadedPolicy, error) {
	return LoadPoliciesWithOptions(context.Background(), path, LoadOptions{})
}

// LoadPoliciesWithOptions reads every ProvisioningPolicy in path (a file, or a folder walked recursively
// for the regular files named *.yaml and *.yml). Documents of other kinds are skipped. Each policy is
// validated exactly as the admission webhook validates it; errors name the file, the document and the
// field. It fails when no policy is found, whatever opts.AllowEmpty says. Reads stop when ctx is done.
func LoadPoliciesWithOptions(ctx context.Context, path string, opts LoadOptions) ([]LoadedPolicy, error) {
	out, err := loadPolicies(ctx, path, opts)
	if err != nil {
		return nil, err
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("load policies: no %s found in %s; expected YAML manifests with apiVersion: %s and kind: %s", PolicyKind, path, PolicyAPIVersion, PolicyKind)
	}
	return out, nil
}

// loadPolicies reads and validates the policies in path, as LoadPoliciesWithOptions does, but finds none
// without an error.
func loadPolicies(ctx context.Context, path string, opts LoadOptions) ([]LoadedPolicy, error) {
	var out []LoadedPolicy
	var errs []error
	seen := map[string]string{}
	_, err := readAll(ctx, []string{path}, nil, opts, policyExts, func(d document) error {
		lp, ok, err := decodePolicy(d)
		if err != nil {
			errs = append(errs, err)
			return nil
		}
		if !ok {
			return nil
		}
		if prev, dup := seen[lp.Policy.Name]; dup {
			errs = append(errs, fmt.Errorf("%s: policy %s is also defined in %s; policy names must be unique", lp.Source, lp.Policy.Name, prev))
			return nil
		}
		seen[lp.Policy.Name] = lp.Source
		if err := policy.Validate(lp.Policy); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w%s", lp.Source, err, regoLineHint(lp.RegoLine)))
			return nil
		}
		out = append(out, lp)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("load policies: %w", err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, fmt.Errorf("load policies: %w", err)
	}
	return out, nil
}

func regoLineHint(line int) string {
	if line == 0 {
		return ""
	}
	return fmt.Sprintf("\n(line 1 of spec.rego is line %d of the file)", line)
}

// decodePolicy decodes one document; ok is false for documents that are not ProvisioningPolicies.
func decodePolicy(d document) (LoadedPolicy, bool, error) {
	v, err := decodeDocument(d)
	if err != nil {
		return LoadedPolicy{}, false, err
	}
	obj, isObj := v.(map[string]any)
	if !isObj || obj["kind"] != PolicyKind {
		return LoadedPolicy{}, false, nil
	}
	if obj["apiVersion"] != PolicyAPIVersion {
		return LoadedPolicy{}, false, fmt.Errorf("%s: apiVersion %v is not supported for %s; use %s", d.source, obj["apiVersion"], PolicyKind, PolicyAPIVersion)
	}
	js, err := json.Marshal(obj)
	if err != nil {
		return LoadedPolicy{}, false, fmt.Errorf("%s: %w", d.source, err)
	}
	// Decode into the API type, strictly, so typos surface, and convert exactly as the webhook and
	// the audit controller do.
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.DisallowUnknownFields()
	var pp v1alpha1.ProvisioningPolicy
	if err := dec.Decode(&pp); err != nil {
		return LoadedPolicy{}, false, fmt.Errorf("%s: %w; spec fields are rego, enforcementAction, match{kinds, operations, namespaceSelector} and parameters", d.source, err)
	}
	p, err := policyobject.ToPolicy(&pp)
	if err != nil {
		return LoadedPolicy{}, false, fmt.Errorf("%s: %w", d.source, err)
	}
	lp := LoadedPolicy{Source: d.source, Policy: p}
	lines := strings.Split(string(d.text), "\n")
	for i, l := range lines {
		if regoBlock.MatchString(l) {
			lp.RegoLine = d.line + i + 1
			break
		}
	}
	return lp, true, nil
}

// Policies returns the policies of loaded, in order.
func Policies(loaded []LoadedPolicy) []policy.Policy {
	out := make([]policy.Policy, len(loaded))
	for i, lp := range loaded {
		out[i] = lp.Policy
	}
	return out
}
