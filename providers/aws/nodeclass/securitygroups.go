package nodeclass

import (
	"context"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
)

// securityGroups resolves securityGroupSelectorTerms: each term is one DescribeSecurityGroups
// with the group-id, group-name or tag filters, cached per term. The result is ordered by ID.
func (c *Controller) securityGroups(ctx context.Context, terms []awsv1.SecurityGroupSelectorTerm) (termResult[awsv1.SecurityGroup], error) {
	res, err := resolveTerms(terms, "spec.securityGroupSelectorTerms", func(term awsv1.SecurityGroupSelectorTerm) ([]awsv1.SecurityGroup, error) {
		return c.securityGroupCache.getOrLoad(cacheKey("securitygroups", term), func() ([]awsv1.SecurityGroup, error) {
			filters := tagFilters(term.Tags)
			if term.ID != "" {
				filters = append(filters, filter("group-id", term.ID))
			}
			if term.Name != "" {
				filters = append(filters, filter("group-name", term.Name))
			}
			var out []awsv1.SecurityGroup
			pages := ec2.NewDescribeSecurityGroupsPaginator(c.ec2, &ec2.DescribeSecurityGroupsInput{Filters: filters})
			for pages.HasMorePages() {
				page, err := pages.NextPage(ctx)
				if err != nil {
					return nil, wrapAPI("ec2:DescribeSecurityGroups", err)
				}
				for _, g := range page.SecurityGroups {
					out = append(out, awsv1.SecurityGroup{ID: aws.ToString(g.GroupId), Name: aws.ToString(g.GroupName)})
				}
			}
			return out, nil
		})
	}, func(g awsv1.SecurityGroup) string { return g.ID }, func(term awsv1.SecurityGroupSelectorTerm) string {
		return explainTerm(term.Tags, "id", term.ID, "name", term.Name)
	})
	slices.SortFunc(res.items, func(a, b awsv1.SecurityGroup) int { return strings.Compare(a.ID, b.ID) })
	return res, err
}
