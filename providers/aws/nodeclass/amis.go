package nodeclass

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/ssm"
	corev1 "k8s.io/api/core/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
	karpv1 "github.com/joiner-dev/joiner/api/karpenter/v1"
)

// amiResult is what amiSelectorTerms resolved to. When amis is empty, reason and message say why.
type amiResult struct {
	amis      []awsv1.AMI
	unmatched []string
	reason    string
	message   string
}

// image is an AMI found in EC2 with the requirements of the instance types it serves.
type image struct {
	ami     awsv1.AMI
	created time.Time
}

// amis resolves amiSelectorTerms. An alias term resolves through the SSM parameters AWS
// publishes for the family, the cluster's Kubernetes version and the alias version, one AMI
// per architecture and variant (standard, nvidia). Other terms resolve through DescribeImages
// (by id, by name and owner, by tags, or by the AMI ID an ssmParameter holds); of the AMIs
// serving the same requirements only the newest is kept, a deprecated one only when no other is.
func (c *Controller) amis(ctx context.Context, nc *awsv1.EC2NodeClass) (amiResult, error) {
	for i, term := range nc.Spec.AMISelectorTerms {
		if term.Alias != "" {
			return c.aliasAMIs(ctx, fmt.Sprintf("spec.amiSelectorTerms[%d].alias", i), term.Alias)
		}
	}
	var res amiResult
	var found []image
	for i, term := range nc.Spec.AMISelectorTerms {
		field := fmt.Sprintf("spec.amiSelectorTerms[%d]", i)
		var (
			images []image
			err    error
			why    string
		)
		switch {
		case term.SSMParameter != "":
			id, ok, perr := c.parameter(ctx, term.SSMParameter)
			if err = perr; err == nil && !ok {
				why = ": the SSM parameter does not exist"
			}
			if ok {
				images, err = c.describeImages(ctx, imageQuery{Filters: []ec2types.Filter{filter("image-id", id)}})
				if err == nil && len(images) == 0 {
					why = fmt.Sprintf(": the SSM parameter holds %s, which is not an AMI visible to this account", id)
				}
			}
		case term.ID != "":
			images, err = c.describeImages(ctx, imageQuery{Filters: []ec2types.Filter{filter("image-id", term.ID)}})
		default:
			q := imageQuery{Filters: tagFilters(term.Tags)}
			if term.Name != "" {
				q.Filters = append(q.Filters, filter("name", term.Name))
			}
			switch {
			case term.Owner != "":
				q.Owners = []string{term.Owner}
			case term.Name != "":
				q.Owners = []string{"self", "amazon"} // a bare name could otherwise match anyone's public AMI
			}
			images, err = c.describeImages(ctx, q)
		}
		if err != nil {
			return amiResult{}, err
		}
		if len(images) == 0 {
			res.unmatched = append(res.unmatched, fmt.Sprintf("%s (%s)%s", field,
				explainTerm(term.Tags, "id", term.ID, "name", term.Name, "owner", term.Owner, "ssmParameter", term.SSMParameter), why))
		}
		found = append(found, images...)
	}
	res.amis = newestPerRequirements(found)
	if len(res.amis) == 0 {
		res.reason = awsv1.ReasonAMINotFound
		res.message = "no AMI matches " + strings.Join(res.unmatched, ", ") + ": fix spec.amiSelectorTerms, or the names, owners or tags of your AMIs"
	}
	return res, nil
}

// aliasAMIs resolves an alias term through the SSM parameters of its family.
func (c *Controller) aliasAMIs(ctx context.Context, field, value string) (amiResult, error) {
	alias, err := awsv1.ParseAlias(value)
	if err != nil {
		return amiResult{reason: awsv1.ReasonUnsupportedAlias, message: fmt.Sprintf("%s: %v", field, err)}, nil
	}
	if c.opts.KubernetesVersion == nil {
		return amiResult{reason: awsv1.ReasonAMINotFound,
			message: fmt.Sprintf("%s %s: the cluster's Kubernetes version is unknown to Joiner, so no alias can resolve: select AMIs by id, name or tags", field, value)}, nil
	}
	k8s, err := c.opts.KubernetesVersion(ctx)
	if err != nil {
		return amiResult{}, fmt.Errorf("get the Kubernetes version for %s %s: %w", field, value, err)
	}
	variants, err := aliasVariants(alias, k8s)
	if err != nil {
		return amiResult{reason: awsv1.ReasonUnsupportedAlias, message: fmt.Sprintf("%s %s: %v", field, value, err)}, nil
	}
	var ids []string
	byID := map[string][]aliasVariant{}
	var missing []string
	for _, v := range variants {
		id, ok, err := c.parameter(ctx, v.parameter)
		if err != nil {
			return amiResult{}, err
		}
		if !ok {
			missing = append(missing, v.parameter)
			continue
		}
		if len(byID[id]) == 0 {
			ids = append(ids, id)
		}
		byID[id] = append(byID[id], v)
	}
	var images []image
	if len(ids) > 0 {
		if images, err = c.describeImages(ctx, imageQuery{Filters: []ec2types.Filter{filter("image-id", ids...)}}); err != nil {
			return amiResult{}, err
		}
	}
	var res amiResult
	for _, img := range images {
		for _, v := range byID[img.ami.ID] {
			a := img.ami
			a.Requirements = v.requirements
			res.amis = append(res.amis, a)
		}
	}
	slices.SortFunc(res.amis, func(a, b awsv1.AMI) int { return cmp.Compare(a.Name, b.Name) })
	if len(res.amis) == 0 {
		res.reason = awsv1.ReasonAMINotFound
		what := fmt.Sprintf("AWS publishes no %s AMI release %q for Kubernetes %s", alias.Family, alias.Version, k8s)
		if len(ids) > 0 {
			what = fmt.Sprintf("the SSM parameters of %s for Kubernetes %s name AMIs this account cannot see (%s)", alias.Family, k8s, strings.Join(ids, ", "))
		} else if len(missing) > 0 {
			what += " (SSM parameters not found: " + strings.Join(missing, ", ") + ")"
		}
		res.message = fmt.Sprintf("%s %s: %s: pick a version published for Kubernetes %s, or select AMIs by id, name or tags", field, value, what, k8s)
	}
	return res, nil
}

// aliasVariant is one SSM parameter of an alias with the requirements its AMI serves.
type aliasVariant struct {
	parameter    string
	requirements []corev1.NodeSelectorRequirement
}

// windowsBuilds are the node.kubernetes.io/windows-build values of the Windows families.
var windowsBuilds = map[string]struct{ year, build string }{
	awsv1.AMIFamilyWindows2019: {"2019", "10.0.17763"},
	awsv1.AMIFamilyWindows2022: {"2022", "10.0.20348"},
	awsv1.AMIFamilyWindows2025: {"2025", "10.0.26100"},
}

// aliasVariants lists the SSM parameters AWS publishes for an alias at a Kubernetes version.
func aliasVariants(alias awsv1.Alias, k8s string) ([]aliasVariant, error) {
	latest := alias.Version == awsv1.AliasVersionLatest
	var out []aliasVariant
	switch alias.Family {
	case awsv1.AMIFamilyAL2023:
		for _, arch := range []string{"x86_64", "arm64"} {
			for _, variant := range []string{"standard", "nvidia"} {
				name := "recommended"
				if !latest {
					name = fmt.Sprintf("amazon-eks-node-al2023-%s-%s-%s-%s", arch, variant, k8s, alias.Version)
				}
				out = append(out, aliasVariant{
					parameter:    fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2023/%s/%s/%s/image_id", k8s, arch, variant, name),
					requirements: linuxRequirements(arch, variant)})
			}
		}
	case awsv1.AMIFamilyAL2:
		for _, v := range []struct{ suffix, prefix, arch, variant string }{
			{"", "", "x86_64", "standard"}, {"-arm64", "arm64-", "arm64", "standard"}, {"-gpu", "gpu-", "x86_64", "nvidia"},
		} {
			name := "recommended"
			if !latest {
				name = fmt.Sprintf("amazon-eks-%snode-%s-%s", v.prefix, k8s, alias.Version)
			}
			out = append(out, aliasVariant{
				parameter:    fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2%s/%s/image_id", k8s, v.suffix, name),
				requirements: linuxRequirements(v.arch, v.variant)})
		}
	case awsv1.AMIFamilyBottlerocket:
		version := strings.TrimPrefix(alias.Version, "v")
		for _, arch := range []string{"x86_64", "arm64"} {
			for _, variant := range []string{"standard", "nvidia"} {
				flavor := ""
				if variant == "nvidia" {
					flavor = "-nvidia"
				}
				out = append(out, aliasVariant{
					parameter:    fmt.Sprintf("/aws/service/bottlerocket/aws-k8s-%s%s/%s/%s/image_id", k8s, flavor, arch, version),
					requirements: linuxRequirements(arch, variant)})
			}
		}
	case awsv1.AMIFamilyWindows2019, awsv1.AMIFamilyWindows2022, awsv1.AMIFamilyWindows2025:
		if !latest {
			return nil, fmt.Errorf("windows families only accept version %q", awsv1.AliasVersionLatest)
		}
		w := windowsBuilds[alias.Family]
		out = append(out, aliasVariant{
			parameter: fmt.Sprintf("/aws/service/ami-windows-latest/Windows_Server-%s-English-Core-EKS_Optimized-%s/image_id", w.year, k8s),
			requirements: []corev1.NodeSelectorRequirement{
				{Key: karpv1.LabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{karpv1.ArchitectureAmd64}},
				{Key: karpv1.LabelOS, Operator: corev1.NodeSelectorOpIn, Values: []string{"windows"}},
				{Key: karpv1.LabelWindowsBuild, Operator: corev1.NodeSelectorOpIn, Values: []string{w.build}},
			}})
	default:
		return nil, fmt.Errorf("family %s has no alias", alias.Family)
	}
	return out, nil
}

// linuxRequirements are the requirements of an EKS-optimized Linux AMI: its architecture, and
// GPUs for the nvidia variant or neither GPUs nor accelerators for the standard one.
func linuxRequirements(arch, variant string) []corev1.NodeSelectorRequirement {
	out := []corev1.NodeSelectorRequirement{{Key: karpv1.LabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{kubeArch(arch)}}}
	if variant == "nvidia" {
		return append(out, corev1.NodeSelectorRequirement{Key: awsv1.LabelInstanceGPUCount, Operator: corev1.NodeSelectorOpExists})
	}
	return append(out,
		corev1.NodeSelectorRequirement{Key: awsv1.LabelInstanceAcceleratorCount, Operator: corev1.NodeSelectorOpDoesNotExist},
		corev1.NodeSelectorRequirement{Key: awsv1.LabelInstanceGPUCount, Operator: corev1.NodeSelectorOpDoesNotExist})
}

// kubeArch maps an EC2 architecture to the kubernetes.io/arch value.
func kubeArch(arch string) string {
	switch arch {
	case "x86_64", "x86_64_mac":
		return karpv1.ArchitectureAmd64
	case "arm64", "arm64_mac":
		return karpv1.ArchitectureArm64
	}
	return arch
}

// imageQuery is one DescribeImages.
type imageQuery struct {
	Owners  []string
	Filters []ec2types.Filter
}

// describeImages runs q (cached), deprecated AMIs included, and returns the AMIs with their
// architecture requirement.
func (c *Controller) describeImages(ctx context.Context, q imageQuery) ([]image, error) {
	return c.imageCache.getOrLoad(cacheKey("images", q), func() ([]image, error) {
		var out []image
		now := c.clock.Now()
		pages := ec2.NewDescribeImagesPaginator(c.ec2, &ec2.DescribeImagesInput{Owners: q.Owners, Filters: q.Filters, IncludeDeprecated: aws.Bool(true)})
		for pages.HasMorePages() {
			page, err := pages.NextPage(ctx)
			if err != nil {
				return nil, wrapAPI("ec2:DescribeImages", err)
			}
			for _, img := range page.Images {
				if img.State != "" && img.State != ec2types.ImageStateAvailable {
					continue
				}
				created, _ := time.Parse(time.RFC3339, aws.ToString(img.CreationDate))
				deprecated := false
				if t, err := time.Parse(time.RFC3339, aws.ToString(img.DeprecationTime)); err == nil && !t.After(now) {
					deprecated = true
				}
				out = append(out, image{created: created, ami: awsv1.AMI{
					ID: aws.ToString(img.ImageId), Name: aws.ToString(img.Name), Deprecated: deprecated,
					Requirements: []corev1.NodeSelectorRequirement{{Key: karpv1.LabelArch, Operator: corev1.NodeSelectorOpIn, Values: []string{kubeArch(string(img.Architecture))}}},
				}})
			}
		}
		return out, nil
	})
}

// newestPerRequirements keeps, for each set of requirements, the newest AMI that is not
// deprecated, or the newest deprecated one when all are. The result is ordered newest first.
func newestPerRequirements(images []image) []awsv1.AMI {
	best := map[string]image{}
	for _, img := range images {
		key := cacheKey("requirements", img.ami.Requirements)
		cur, ok := best[key]
		if !ok || better(img, cur) {
			best[key] = img
		}
	}
	kept := make([]image, 0, len(best))
	for _, img := range best {
		kept = append(kept, img)
	}
	slices.SortFunc(kept, func(a, b image) int {
		return cmp.Or(b.created.Compare(a.created), cmp.Compare(a.ami.ID, b.ami.ID))
	})
	out := make([]awsv1.AMI, 0, len(kept))
	for _, img := range kept {
		out = append(out, img.ami)
	}
	return out
}

func better(a, b image) bool {
	if a.ami.Deprecated != b.ami.Deprecated {
		return !a.ami.Deprecated
	}
	if !a.created.Equal(b.created) {
		return a.created.After(b.created)
	}
	return a.ami.ID < b.ami.ID
}

// parameter returns the value of an SSM parameter: found values are cached for the SSM TTL,
// missing parameters for the AMI TTL (AWS may publish them soon).
func (c *Controller) parameter(ctx context.Context, name string) (string, bool, error) {
	if v, ok := c.ssmCache.get(name); ok {
		return v, v != "", nil
	}
	if _, ok := c.ssmMissingCache.get(name); ok {
		return "", false, nil
	}
	out, err := c.ssm.GetParameter(ctx, &ssm.GetParameterInput{Name: aws.String(name)})
	switch {
	case errorCode(err) == "ParameterNotFound" || errorCode(err) == "ParameterVersionNotFound":
		c.ssmMissingCache.set(name, true)
		return "", false, nil
	case err != nil:
		return "", false, wrapAPI("ssm:GetParameter", err)
	case out.Parameter == nil || aws.ToString(out.Parameter.Value) == "":
		return "", false, wrapAPI("ssm:GetParameter", errors.New("parameter "+name+" has no value"))
	}
	v := aws.ToString(out.Parameter.Value)
	c.ssmCache.set(name, v)
	return v, true, nil
}
