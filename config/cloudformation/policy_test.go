package cloudformation_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"maps"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// repoRoot is the module root, two folders up from this package.
var repoRoot = filepath.Join("..", "..")

// ownFolder is this package's folder. Its client (stack.go) creates stacks of the template for
// tests; the controller never imports it, so its CloudFormation calls need no grant.
const ownFolder = "config/cloudformation"

// sdkServicePrefix is where the AWS SDK's service clients live.
const sdkServicePrefix = "github.com/aws/aws-sdk-go-v2/service/"

// iamPrefixes maps the SDK package of a service to the prefix of its IAM actions. A call into a
// service missing here fails TestControllerPolicyCoversProvider, so that its actions are added
// to the template (and this map) on purpose.
var iamPrefixes = map[string]string{
	"ec2": "ec2", "eks": "eks", "iam": "iam", "ssm": "ssm", "sqs": "sqs", "pricing": "pricing", "sts": "sts",
}

// implied are the actions the policy grants that no SDK call names, because a call needs them:
// each is kept only while one of the calls in by is made.
var implied = map[string]struct {
	by  []string
	why string
}{
	"ec2:RunInstances": {[]string{"ec2:CreateFleet"}, "an instant fleet launches its instances through RunInstances, which IAM authorizes separately"},
	"ec2:CreateTags":   {[]string{"ec2:CreateFleet", "ec2:CreateLaunchTemplate"}, "tags given at creation (TagSpecifications) need ec2:CreateTags on the new resource"},
	"iam:PassRole":     {[]string{"iam:AddRoleToInstanceProfile", "ec2:CreateFleet"}, "adding the node role to an instance profile, and launching with that profile, pass the role"},
}

// sdkCalls returns the IAM actions of the AWS SDK operations the Go files under root name
// (`ec2.DescribeSubnetsInput`, `ec2.NewDescribeSubnetsPaginator`), with the files naming each,
// and the SDK service packages imported that iamPrefixes does not know. Test files, test-support
// packages (e2e, testsupport, hack, any .../awstest, this package) and hidden folders are left
// out: only what the controller binary runs counts.
func sdkCalls(t *testing.T, root string) (calls map[string][]string, unknown []string) {
	t.Helper()
	calls = map[string][]string{}
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			top, _, _ := strings.Cut(filepath.ToSlash(rel), "/")
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "awstest" || d.Name() == "testdata" ||
				top == "e2e" || top == "testsupport" || top == "hack" || filepath.ToSlash(rel) == ownFolder) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		for op := range fileSDKCalls(f, &unknown) {
			calls[op] = append(calls[op], filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatalf("scan %s for AWS SDK calls: %v", root, err)
	}
	slices.Sort(unknown)
	return calls, slices.Compact(unknown)
}

// fileSDKCalls returns the IAM actions of the SDK operations one file names, and appends the
// SDK service packages it imports without a known IAM prefix to unknown.
func fileSDKCalls(f *ast.File, unknown *[]string) map[string]bool {
	services := map[string]string{} // local package name → IAM prefix
	for _, imp := range f.Imports {
		p, _ := strconv.Unquote(imp.Path.Value)
		svc, ok := strings.CutPrefix(p, sdkServicePrefix)
		if !ok || strings.Contains(svc, "/") { // .../service/ec2/types and the like hold no calls
			continue
		}
		local := svc
		if imp.Name != nil {
			local = imp.Name.Name
		}
		prefix, known := iamPrefixes[svc]
		if !known {
			*unknown = append(*unknown, svc)
			prefix = svc
		}
		services[local] = prefix
	}
	ops := map[string]bool{}
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		pkg, ok := sel.X.(*ast.Ident)
		if !ok || services[pkg.Name] == "" {
			return true
		}
		if op := operationOf(sel.Sel.Name); op != "" {
			ops[services[pkg.Name]+":"+op] = true
		}
		return true
	})
	return ops
}

// operationOf returns the operation an SDK identifier names: DescribeSubnets for
// DescribeSubnetsInput and NewDescribeSubnetsPaginator, "" for anything else (clients, options,
// outputs). A waiter needs no rule: its Describe call takes that operation's Input type.
func operationOf(name string) string {
	if op, ok := strings.CutSuffix(name, "Input"); ok && op != "" {
		return op
	}
	if op, ok := strings.CutPrefix(name, "New"); ok {
		if op, ok = strings.CutSuffix(op, "Paginator"); ok && op != "" {
			return op
		}
	}
	return ""
}

// TestSDKCallScanner checks the scanner on small sources: aliases, paginators, the types
// packages, and services it does not know.
func TestSDKCallScanner(t *testing.T) {
	for _, tc := range []struct {
		name, src   string
		want        []string
		wantUnknown []string
	}{
		{name: "input types and paginators", src: `package p
import ("github.com/aws/aws-sdk-go-v2/service/ec2"; ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types")
func f(c *ec2.Client) { _ = ec2.NewDescribeSubnetsPaginator(c, &ec2.DescribeSubnetsInput{}); var _ ec2types.Filter; c.CreateFleet(nil, &ec2.CreateFleetInput{}) }`,
			want: []string{"ec2:CreateFleet", "ec2:DescribeSubnets"}},
		{name: "an alias", src: `package p
import awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
type API interface { ReceiveMessage(in *awssqs.ReceiveMessageInput) }`,
			want: []string{"sqs:ReceiveMessage"}},
		{name: "clients and options are no calls", src: `package p
import "github.com/aws/aws-sdk-go-v2/service/iam"
var _ = iam.NewFromConfig; var _ iam.Options; var _ *iam.Client`},
		{name: "an unknown service", src: `package p
import "github.com/aws/aws-sdk-go-v2/service/s3"
var _ s3.GetObjectInput`,
			want: []string{"s3:GetObject"}, wantUnknown: []string{"s3"}},
		{name: "another package's Input", src: `package p
import "example.com/ec2"
var _ ec2.DescribeSubnetsInput`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, err := parser.ParseFile(token.NewFileSet(), "p.go", tc.src, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			var unknown []string
			got := slices.Sorted(maps.Keys(fileSDKCalls(f, &unknown)))
			if !slices.Equal(got, tc.want) || !slices.Equal(unknown, tc.wantUnknown) {
				t.Errorf("calls %v, unknown %v; want %v, %v", got, unknown, tc.want, tc.wantUnknown)
			}
		})
	}
}

// TestControllerPolicyCoversProvider derives the AWS actions Joiner calls from the source (every
// SDK operation a non-test file names) and compares them with the controller policy of
// joiner.yaml: an action called but not granted fails (the controller would get AccessDenied in
// an account), and so does one granted but neither called nor implied by a call (the policy is
// least privilege).
func TestControllerPolicyCoversProvider(t *testing.T) {
	calls, unknown := sdkCalls(t, repoRoot)
	if len(unknown) > 0 {
		t.Errorf("the controller calls AWS services %v that iamPrefixes does not map: grant their actions in joiner.yaml and add them", unknown)
	}
	// A scanner that finds nothing would pass everything: these calls are the provider's core.
	for _, core := range []string{"ec2:CreateFleet", "ec2:TerminateInstances", "ec2:DescribeSubnets", "iam:CreateInstanceProfile", "sqs:ReceiveMessage", "ssm:GetParameter"} {
		if calls[core] == nil {
			t.Errorf("found no %s call in the source (found %v): the scanner is broken", core, slices.Sorted(maps.Keys(calls)))
		}
	}
	granted := policyActions(statements(t, controllerPolicy(t)))
	for _, op := range slices.Sorted(maps.Keys(calls)) {
		if !slices.Contains(granted, op) {
			t.Errorf("%s is called (%s) but the controller policy of joiner.yaml does not grant it: add it to the statement it belongs to, scoped as tightly as the others",
				op, strings.Join(calls[op], ", "))
		}
	}
	for _, a := range granted {
		if calls[a] != nil {
			continue
		}
		imp, ok := implied[a]
		if !ok {
			t.Errorf("the controller policy grants %s, which nothing in the source calls: remove it (or, if a call needs it, add it to implied with the reason)", a)
			continue
		}
		if !slices.ContainsFunc(imp.by, func(op string) bool { return calls[op] != nil }) {
			t.Errorf("the controller policy grants %s because %s, but none of %v is called any more: remove it", a, imp.why, imp.by)
		}
	}
	t.Logf("the controller calls %d AWS actions; the policy grants %d", len(calls), len(granted))
}
