package nodeclass

import (
	"cmp"
	"context"
	"slices"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
)

// subnets resolves subnetSelectorTerms: each term is one DescribeSubnets with the subnet-id or
// tag filters, cached per term. The result is ordered by zone, then by free addresses (most
// first), then by ID.
func (c *Controller) subnets(ctx context.Context, terms []awsv1.SubnetSelectorTerm) (termResult[ec2types.Subnet], error) {
	res, err := resolveTerms(terms, "spec.subnetSelectorTerms", func(term awsv1.SubnetSelectorTerm) ([]ec2types.Subnet, error) {
		return c.subnetCache.getOrLoad(cacheKey("subnets", term), func() ([]ec2types.Subnet, error) {
			filters := tagFilters(term.Tags)
			if term.ID != "" {
				filters = append(filters, filter("subnet-id", term.ID))
			}
			var out []ec2types.Subnet
			pages := ec2.NewDescribeSubnetsPaginator(c.ec2, &ec2.DescribeSubnetsInput{Filters: filters})
			for pages.HasMorePages() {
				page, err := pages.NextPage(ctx)
				if err != nil {
					return nil, wrapAPI("ec2:DescribeSubnets", err)
				}
				out = append(out, page.Subnets...)
			}
			return out, nil
		})
	}, func(s ec2types.Subnet) string { return aws.ToString(s.SubnetId) }, func(term awsv1.SubnetSelectorTerm) string {
		return explainTerm(term.Tags, "id", term.ID)
	})
	if err != nil {
		return res, err
	}
	slices.SortFunc(res.items, func(a, b ec2types.Subnet) int {
		return cmp.Or(
			cmp.Compare(aws.ToString(a.AvailabilityZone), aws.ToString(b.AvailabilityZone)),
			cmp.Compare(aws.ToInt32(b.AvailableIpAddressCount), aws.ToInt32(a.AvailableIpAddressCount)),
			cmp.Compare(aws.ToString(a.SubnetId), aws.ToString(b.SubnetId)))
	})
	return res, nil
}

func subnetStatus(subnets []ec2types.Subnet) []awsv1.Subnet {
	out := make([]awsv1.Subnet, 0, len(subnets))
	for _, s := range subnets {
		out = append(out, awsv1.Subnet{ID: aws.ToString(s.SubnetId), Zone: aws.ToString(s.AvailabilityZone), ZoneID: aws.ToString(s.AvailabilityZoneId)})
	}
	return out
}
