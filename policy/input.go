package policy

import (
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
)

// Keys of the input document. The shape follows Gatekeeper's so policies port over:
//
//	input.review.object, .oldObject, .operation, .userInfo{username,uid,groups,extra},
//	input.review.kind{group,version,kind}, .namespace, .name
//	input.parameters
var (
	keyReview     = ast.StringTerm("review")
	keyParameters = ast.StringTerm("parameters")
)

// reviewTerm converts a review to the AST value of input.review. It runs once per review; every matched
// policy shares the result, so the object is converted only once however many policies run.
func reviewTerm(r *Review) (*ast.Term, error) {
	object, err := objectTerm(r.Object)
	if err != nil {
		return nil, fmt.Errorf("review object %s %q: %w", r.Kind.Kind, r.Name, err)
	}
	oldObject, err := objectTerm(r.OldObject)
	if err != nil {
		return nil, fmt.Errorf("review old object %s %q: %w", r.Kind.Kind, r.Name, err)
	}
	groups := make([]*ast.Term, len(r.UserInfo.Groups))
	for i, g := range r.UserInfo.Groups {
		groups[i] = ast.StringTerm(g)
	}
	extra := ast.NewObject()
	for k, vs := range r.UserInfo.Extra {
		vals := make([]*ast.Term, len(vs))
		for i, v := range vs {
			vals[i] = ast.StringTerm(v)
		}
		extra.Insert(ast.StringTerm(k), ast.ArrayTerm(vals...))
	}
	return ast.ObjectTerm(
		ast.Item(ast.StringTerm("object"), object),
		ast.Item(ast.StringTerm("oldObject"), oldObject),
		ast.Item(ast.StringTerm("operation"), ast.StringTerm(string(r.Operation))),
		ast.Item(ast.StringTerm("kind"), ast.ObjectTerm(
			ast.Item(ast.StringTerm("group"), ast.StringTerm(r.Kind.Group)),
			ast.Item(ast.StringTerm("version"), ast.StringTerm(r.Kind.Version)),
			ast.Item(ast.StringTerm("kind"), ast.StringTerm(r.Kind.Kind)),
		)),
		ast.Item(ast.StringTerm("name"), ast.StringTerm(r.Name)),
		ast.Item(ast.StringTerm("namespace"), ast.StringTerm(r.Namespace)),
		ast.Item(ast.StringTerm("userInfo"), ast.ObjectTerm(
			ast.Item(ast.StringTerm("username"), ast.StringTerm(r.UserInfo.Username)),
			ast.Item(ast.StringTerm("uid"), ast.StringTerm(r.UserInfo.UID)),
			ast.Item(ast.StringTerm("groups"), ast.ArrayTerm(groups...)),
			ast.Item(ast.StringTerm("extra"), ast.NewTerm(extra)),
		)),
	), nil
}

// objectTerm converts an unstructured object; nil becomes null.
func objectTerm(obj map[string]any) (*ast.Term, error) {
	if obj == nil {
		return ast.NullTerm(), nil
	}
	v, err := ast.InterfaceToValue(obj)
	if err != nil {
		return nil, err
	}
	return ast.NewTerm(v), nil
}

// inputValue is the input document for one policy: the shared review plus the policy's own parameters.
func inputValue(review, params *ast.Term) ast.Object {
	return ast.NewObject(ast.Item(keyReview, review), ast.Item(keyParameters, params))
}
