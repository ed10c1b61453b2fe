// Package admissioncheck is `joiner check`: the verdict a cluster running Joiner would give each
// manifest, reached without a cluster, with the same code and the same messages. For each object it
// replays the apiserver's admission chain: the kind must be served (legacy Karpenter kinds are sent to
// `joiner convert`); the body is decoded, pruned and defaulted against Joiner's CRDs; Joiner's
// mutating webhooks run (their handlers, called in-process under the names and rules of
// config/webhook); the object is validated against the CRD's OpenAPI schema and CEL rules (package
// crdvalidation, on the apiserver's own validation packages); then Joiner's validating webhooks run:
// the semantic checks and the ProvisioningPolicies, through the same handlers and policy engine.
//
// The objects checked together form the cluster the webhooks see: their node classes, NodePools and
// Namespaces answer the webhooks' lookups and fill the policies' data.inventory. This package decides
// nothing itself; it wires the webhooks, crdvalidation and policy packages and formats their answers.
package admissioncheck

import (
	"context"
	"encoding/json"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/go-logr/logr"
	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	webhookerrors "k8s.io/apiserver/pkg/admission/plugin/webhook/errors"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	jsonpatch "github.com/evanphx/json-patch/v5"

	apischeme "github.com/joiner-dev/joiner/api/scheme"
	"github.com/joiner-dev/joiner/crdvalidation"
	"github.com/joiner-dev/joiner/policy"
	"github.com/joiner-dev/joiner/providers/catalog"
	"github.com/joiner-dev/joiner/webhooks"
)

// Options configure a Checker. The zero value checks against no policies, rejects unknown fields as
// kubectl does, and skips kinds Joiner does not judge.
type Options struct {
	// Policies are the cluster's ProvisioningPolicies. Nil means none.
	Policies []policy.Policy
	// EvalTimeout bounds the policy evaluation of one object; zero means policy.DefaultEvalTimeout.
	EvalTimeout time.Duration
	// FieldValidation is the requests' fieldValidation; empty means Strict, as with kubectl apply.
	FieldValidation crdvalidation.FieldValidation
	// StrictKinds makes objects of kinds outside Joiner's API groups (Deployments, ConfigMaps, ...) an
	// error instead of skipping them.
	StrictKinds bool
	// PolicyOnly judges objects by the ProvisioningPolicies alone, as the validating webhooks evaluate
	// them, without the schema, the defaults and the semantic checks (`joiner policy check`). Kinds are
	// resolved as in a full check: legacy Karpenter kinds are refused, foreign kinds skipped.
	PolicyOnly bool
	// Parallelism is how many objects are checked at once; zero means GOMAXPROCS.
	Parallelism int
	// Logger receives the webhooks' and the engine's logs; the zero value discards them.
	Logger logr.Logger
}

// Checker checks manifests. Create it with New; a Checker is reused across Check calls, which must not
// overlap (each sets the policy engine's inventory to its own objects).
type Checker struct {
	opts    Options
	schemas *crdvalidation.Schemas
	hooks   hooks
	engine  *policy.Engine
	catalog *catalog.Catalog
	scheme  *kruntime.Scheme
}

// New loads Joiner's CRDs, webhook configurations and instance-type catalog, and compiles opts.Policies.
// A policy that does not compile is an error: the webhook of the ProvisioningPolicy would have refused it.
func New(ctx context.Context, opts Options) (*Checker, error) {
	if opts.FieldValidation == "" {
		opts.FieldValidation = crdvalidation.FieldValidationStrict
	}
	if opts.Parallelism <= 0 {
		opts.Parallelism = runtime.GOMAXPROCS(0)
	}
	if opts.Logger.GetSink() == nil {
		opts.Logger = logr.Discard()
	}
	schemas, err := crdvalidation.Joiner()
	if err != nil {
		return nil, fmt.Errorf("new admission check: %w", err)
	}
	hs, err := loadHooks()
	if err != nil {
		return nil, fmt.Errorf("new admission check: %w", err)
	}
	cat, err := catalog.Load()
	if err != nil {
		return nil, fmt.Errorf("new admission check: load the instance type catalog: %w", err)
	}
	scheme, err := apischeme.New()
	if err != nil {
		return nil, fmt.Errorf("new admission check: %w", err)
	}
	engine := policy.New(policy.Options{Logger: opts.Logger.WithName("policy"), EvalTimeout: opts.EvalTimeout})
	if err := engine.SetPolicies(ctx, opts.Policies); err != nil {
		return nil, fmt.Errorf("new admission check: compile policies: %w", err)
	}
	return &Checker{opts: opts, schemas: schemas, hooks: hs, engine: engine, catalog: cat, scheme: scheme}, nil
}

// PolicyCount returns how many policies the Checker evaluates.
func (c *Checker) PolicyCount() int { return len(c.engine.PolicyNames()) }

// Check judges every item, in parallel, and returns one Result per item in order. The error is reserved
// for what prevents the whole check (ctx done, a broken webhook configuration); a rejected object is a
// Result.
func (c *Checker) Check(ctx context.Context, items []Item) (*Report, error) {
	rep, _, err := c.check(ctx, items)
	return rep, err
}

// check is Check, also returning each item's pass (with its encode and decode counts).
func (c *Checker) check(ctx context.Context, items []Item) (*Report, []*pass, error) {
	passes := make([]*pass, len(items))
	c.each(len(items), func(i int) { passes[i] = c.read(items[i]) })
	s, err := c.newSession(ctx, passes)
	if err != nil {
		return nil, nil, fmt.Errorf("check: %w", err)
	}
	results := make([]Result, len(items))
	errs := make([]error, len(items))
	c.each(len(items), func(i int) { results[i], errs[i] = s.check(ctx, passes[i]) })
	for i, err := range errs {
		if err != nil {
			return nil, nil, fmt.Errorf("check %s: %w", items[i].Source, err)
		}
	}
	return newReport(results, c.PolicyCount()), passes, nil
}

// each calls f for 0..n-1 on Options.Parallelism goroutines and waits for all of them.
func (c *Checker) each(n int, f func(i int)) {
	var wg sync.WaitGroup
	next := make(chan int)
	for range min(c.opts.Parallelism, max(n, 1)) {
		wg.Go(func() {
			for i := range next {
				f(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}

// pass is one item on its way through a check. Its object is read once, for the whole session: what it
// is, and the object as the apiserver decodes it, under FieldValidationWarn so that its unknown fields
// are known whatever the check's field validation. The cluster the webhooks see and the item's own
// admission both start from that decoded object. encodes and decodes count the JSON work on the way.
type pass struct {
	item    Item
	t       target
	kindErr *KindError
	// u is the decoded object, nil when it cannot be read (readErr says why); unknown are the paths of
	// the fields its schema does not declare.
	u       *unstructured.Unstructured
	unknown []string
	readErr error
	// encodes and decodes count this pass's JSON encodings and decodings, the webhooks' included.
	encodes, decodes int
}

// read resolves and decodes an item; see pass.
func (c *Checker) read(it Item) *pass {
	p := &pass{item: it}
	if p.t, p.kindErr = resolve(c.schemas, it.Object); p.kindErr != nil || p.t.contextOnly {
		return p
	}
	p.u, p.unknown, p.readErr = p.readBody(p.t, it.Object, crdvalidation.FieldValidationWarn)
	return p
}

// handedOver counts the JSON work of the webhooks on an object the pass handed them.
func (p *pass) handedOver(obj *webhooks.Object) {
	if obj == nil {
		return
	}
	n := obj.Counts()
	p.encodes += n.Encodes
	p.decodes += n.MapDecodes + n.TypedDecodes
}

// check judges one item; the error is reserved for ctx done and internal inconsistencies.
func (s *session) check(ctx context.Context, p *pass) (Result, error) {
	it := p.item
	res := Result{Source: it.Source, File: it.File, Line: it.Line, Operation: policy.OperationCreate, Allowed: true}
	if it.Old != nil {
		res.Operation = policy.OperationUpdate
	}
	res.APIVersion, _ = it.Object["apiVersion"].(string)
	res.Kind, _ = it.Object["kind"].(string)
	meta, _ := it.Object["metadata"].(map[string]any)
	res.Name, _ = meta["name"].(string)
	res.Namespace, _ = meta["namespace"].(string)
	if err := ctx.Err(); err != nil {
		return res, err
	}
	t, ke := p.t, p.kindErr
	if ke != nil {
		if ke.Foreign && !s.c.opts.StrictKinds {
			res.Skipped, res.SkipReason = true, res.APIVersion+" "+res.Kind+" is not a kind Joiner judges (--strict-kinds makes it an error)"
			return res, nil
		}
		res.reject(ke.Message, Problem{Action: ActionError, By: ByKind, Message: ke.Message})
		return res, nil
	}
	if t.contextOnly {
		res.Skipped, res.SkipReason = true, "Namespaces are read for the Pods' sake, not judged"
		return res, nil
	}
	if t.namespaced && res.Namespace == "" {
		res.Namespace = defaultNamespace
	}
	if s.c.opts.PolicyOnly {
		return res, s.judgePolicies(ctx, p, &res)
	}
	return res, s.admit(ctx, p, &res)
}

// defaultNamespace is where a namespaced object without a namespace goes, as with kubectl's default
// context.
const defaultNamespace = "default"

// admit replays the apiserver's create or update of one object of a known kind: decode, mutating
// webhooks, schema and CEL validation, validating webhooks. A refusal is recorded in res; the error is
// for internal failures.
func (s *session) admit(ctx context.Context, p *pass, res *Result) error {
	t, it := p.t, p.item
	var old *unstructured.Unstructured
	var oldObj *webhooks.Object
	if it.Old != nil {
		var problem string
		var err error
		if old, problem, err = s.stored(ctx, p, it.Old); err != nil {
			return err
		}
		if problem != "" {
			res.reject(problem, Problem{Action: ActionError, By: ByAPIServer, Message: problem})
			return nil
		}
		// The stored object does not change during the admission: every webhook reads the same one.
		oldObj = webhooks.ObjectFromMap(old.Object)
		defer p.handedOver(oldObj)
	}
	u := s.decode(p, res)
	if u == nil {
		return nil
	}
	op := admissionregistrationv1.Create
	if old != nil {
		op = admissionregistrationv1.Update
	}
	u, warnings, denied, err := s.mutate(ctx, p, op, u, oldObj)
	if admitted := res.webhooksAnswered(warnings, denied); err != nil || !admitted {
		return err
	}
	if t.crd != nil {
		if old == nil {
			t.crd.PrepareForCreate(u)
			err = t.crd.ValidateCreate(ctx, u)
		} else {
			t.crd.PrepareForUpdate(u, old)
			err = t.crd.ValidateUpdate(ctx, u, old)
		}
		if err != nil {
			res.rejectStatus(err, ByAPIServer)
			return nil
		}
	}
	warnings, denied, err = s.validate(ctx, p, op, u, oldObj)
	if admitted := res.webhooksAnswered(warnings, denied); err != nil || !admitted {
		return err
	}
	res.Object = u.Object
	return nil
}

// readBody reads obj as the apiserver reads a request body for kind t (see crdvalidation.Kind.Decode),
// under field validation fv, and puts a namespaced object without a namespace in defaultNamespace. It
// returns the object, the paths of unknown fields, and the apiserver's refusal.
func (p *pass) readBody(t target, obj map[string]any, fv crdvalidation.FieldValidation) (*unstructured.Unstructured, []string, error) {
	p.encodes++
	raw, err := json.Marshal(obj)
	if err != nil {
		return nil, nil, fmt.Errorf("encode the object: %w", err)
	}
	p.decodes++
	u := &unstructured.Unstructured{}
	var unknown []string
	if t.crd == nil {
		err = u.UnmarshalJSON(raw)
	} else {
		u, unknown, err = t.crd.Decode(raw, fv)
	}
	if err != nil {
		return nil, unknown, err
	}
	if t.namespaced && u.GetNamespace() == "" {
		u.SetNamespace(defaultNamespace)
	}
	return u, unknown, nil
}

// decode gives the item's object as the apiserver reads the request body under the check's field
// validation, from the object the pass read, and records its unknown fields: warnings, or the refusal
// under strict field validation. It returns a copy the admission may change, or nil when the object is
// refused.
func (s *session) decode(p *pass, res *Result) *unstructured.Unstructured {
	u, unknown, err := p.u, p.unknown, p.readErr
	switch fv := s.c.opts.FieldValidation; {
	case fv == crdvalidation.FieldValidationIgnore:
		unknown = nil
	case fv == crdvalidation.FieldValidationStrict && err == nil && len(unknown) > 0:
		// Refused: only the apiserver's own strict decoding gives its exact message.
		u, unknown, err = p.readBody(p.t, p.item.Object, fv)
	}
	action := ActionWarn
	if err != nil {
		action = ActionDeny
	}
	for _, path := range unknown {
		res.Problems = append(res.Problems, Problem{Action: action, By: ByAPIServer, Field: path, Message: crdvalidation.UnknownFieldMessage(path)})
	}
	switch {
	case err != nil && len(unknown) > 0:
		// Strict field validation: the unknown fields above are the problems, one line each.
		res.Allowed, res.Error = false, err.Error()
	case err != nil:
		res.rejectStatus(err, ByAPIServer)
	}
	if u == nil {
		return nil
	}
	// The session's cluster was built from the same object; the admission changes its own copy.
	return u.DeepCopy()
}

// stored returns old as the cluster holds it: created, with the defaults of the schema and of the
// mutating webhooks, and a resourceVersion. problem says why old could not have been stored; the error
// is for internal failures.
func (s *session) stored(ctx context.Context, p *pass, old map[string]any) (_ *unstructured.Unstructured, problem string, _ error) {
	u, _, err := p.readBody(p.t, old, crdvalidation.FieldValidationIgnore)
	if err != nil {
		return nil, "the old object cannot be read: " + err.Error(), nil
	}
	u, _, denied, err := s.mutate(ctx, p, admissionregistrationv1.Create, u, nil)
	if err != nil {
		return nil, "", err
	}
	if denied != nil {
		return nil, "the old object could not have been created: " + denied.Error(), nil
	}
	if p.t.crd != nil {
		p.t.crd.PrepareForCreate(u)
	}
	if u.GetResourceVersion() == "" {
		u.SetResourceVersion("1")
	}
	return u, "", nil
}

// mutate calls the mutating webhooks that match, in order, applying each one's patch and then the
// schema's defaults, as the apiserver does. The webhooks read u through one webhooks.Object until a patch
// changes it. denied is the apiserver's error for a webhook that refused; err is for internal failures.
func (s *session) mutate(ctx context.Context, p *pass, op admissionregistrationv1.OperationType, u *unstructured.Unstructured, old *webhooks.Object) (_ *unstructured.Unstructured, _ []webhookWarning, denied *apierrors.StatusError, err error) {
	return s.callHooks(ctx, p, true, op, u, old)
}

// validate calls the validating webhooks that match. denied is the apiserver's error for the first one
// that refused; err is for internal failures.
func (s *session) validate(ctx context.Context, p *pass, op admissionregistrationv1.OperationType, u *unstructured.Unstructured, old *webhooks.Object) (_ []webhookWarning, denied *apierrors.StatusError, err error) {
	_, warnings, denied, err := s.callHooks(ctx, p, false, op, u, old)
	return warnings, denied, err
}

// callHooks calls the mutating or the validating webhooks that match u, in order, until one refuses.
// A mutating webhook's patch is applied, then the schema's defaults; u is returned as the last webhook
// left it.
func (s *session) callHooks(ctx context.Context, p *pass, mutating bool, op admissionregistrationv1.OperationType, u *unstructured.Unstructured, old *webhooks.Object) (_ *unstructured.Unstructured, _ []webhookWarning, denied *apierrors.StatusError, err error) {
	var warnings []webhookWarning
	obj := webhooks.ObjectFromMap(u.Object)
	defer func() { p.handedOver(obj) }()
	for i := range s.c.hooks {
		h := &s.c.hooks[i]
		if h.mutating != mutating || !s.matches(h, p.t, op, u) {
			continue
		}
		resp, err := s.call(ctx, h, p.t, op, u, obj, old)
		if err != nil {
			return nil, warnings, nil, err
		}
		warnings = append(warnings, hookWarnings(h, resp)...)
		if !resp.Allowed {
			return nil, warnings, webhookerrors.ToStatusErr(h.name, resp.Result), nil
		}
		if !mutating || len(resp.Patches) == 0 {
			continue
		}
		if u, err = p.applyPatch(obj, resp); err != nil {
			return nil, warnings, nil, fmt.Errorf("webhook %s: %w", h.name, err)
		}
		if p.t.crd != nil {
			p.t.crd.ApplyDefaults(u)
		}
		p.handedOver(obj)
		obj = webhooks.ObjectFromMap(u.Object)
	}
	return u, warnings, nil, nil
}

func (s *session) matches(h *hook, t target, op admissionregistrationv1.OperationType, u *unstructured.Unstructured) bool {
	var nsLabels map[string]string
	if t.namespaced {
		nsLabels = namespaceLabels(u.GetNamespace(), s.namespaceLabels[u.GetNamespace()])
	}
	return h.matches(t.gvr(), t.namespaced, op, nsLabels, u.GetLabels())
}

// call sends one admission request to the handler behind h, as the apiserver would: the object as
// it stands (u, which the handler reads as obj), the stored object on UPDATE, and no user (joiner check
// is nobody in particular). The handler gets the objects decoded, not as JSON.
func (s *session) call(ctx context.Context, h *hook, t target, op admissionregistrationv1.OperationType, u *unstructured.Unstructured, obj, old *webhooks.Object) (admission.Response, error) {
	handler, ok := s.handlers[h.path]
	if !ok {
		return admission.Response{}, fmt.Errorf("webhook %s calls %s, which Joiner does not serve", h.name, h.path)
	}
	gvk := metav1.GroupVersionKind{Group: t.gvk.Group, Version: t.gvk.Version, Kind: t.gvk.Kind}
	gvr := metav1.GroupVersionResource{Group: t.gvk.Group, Version: t.gvk.Version, Resource: t.resource}
	req := &webhooks.Request{Request: admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		UID:  types.UID("joiner-check"),
		Kind: gvk, Resource: gvr, RequestKind: &gvk, RequestResource: &gvr,
		Name:      u.GetName(),
		Namespace: u.GetNamespace(),
		Operation: admissionv1.Operation(op),
		UserInfo:  authenticationv1.UserInfo{},
	}}, New: obj, Old: old}
	return handler.HandleDecoded(ctx, req), nil
}

// applyPatch applies a mutating webhook's JSON patch to the object the webhook read.
func (p *pass) applyPatch(obj *webhooks.Object, resp admission.Response) (*unstructured.Unstructured, error) {
	ops, err := json.Marshal(resp.Patches)
	if err != nil {
		return nil, fmt.Errorf("encode the patch: %w", err)
	}
	patch, err := jsonpatch.DecodePatch(ops)
	if err != nil {
		return nil, fmt.Errorf("decode the patch: %w", err)
	}
	// The webhook encoded the object to compute its patch; the patch applies to those bytes.
	raw, err := obj.Raw()
	if err != nil {
		return nil, err
	}
	patched, err := patch.Apply(raw)
	if err != nil {
		return nil, fmt.Errorf("apply the patch: %w", err)
	}
	p.decodes++
	out := &unstructured.Unstructured{}
	if err := out.UnmarshalJSON(patched); err != nil {
		return nil, fmt.Errorf("decode the patched object: %w", err)
	}
	return out, nil
}

// webhookWarning is one admission warning with the webhook that gave it.
type webhookWarning struct {
	hook, text string
}

func hookWarnings(h *hook, resp admission.Response) []webhookWarning {
	out := make([]webhookWarning, len(resp.Warnings))
	for i, w := range resp.Warnings {
		out[i] = webhookWarning{hook: h.name, text: w}
	}
	return out
}
