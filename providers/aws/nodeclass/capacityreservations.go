package nodeclass

import (
	"context"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
)

// capacityBlockExpiringWindow is how long before its end a capacity block counts as expiring:
// EC2 starts reclaiming its instances then.
const capacityBlockExpiringWindow = 40 * time.Minute

// capacityReservations resolves capacityReservationSelectorTerms to the active reservations
// they select: a term with an id asks for that reservation (a missing one matches nothing), the
// others filter by tags, owner and instance match criteria. Cached per term; ordered by ID.
func (c *Controller) capacityReservations(ctx context.Context, terms []awsv1.CapacityReservationSelectorTerm) (termResult[ec2types.CapacityReservation], error) {
	res, err := resolveTerms(terms, "spec.capacityReservationSelectorTerms", func(term awsv1.CapacityReservationSelectorTerm) ([]ec2types.CapacityReservation, error) {
		return c.reservationCache.getOrLoad(cacheKey("capacityreservations", term), func() ([]ec2types.CapacityReservation, error) {
			in := &ec2.DescribeCapacityReservationsInput{Filters: append(tagFilters(term.Tags), filter("state", string(ec2types.CapacityReservationStateActive)))}
			if term.ID != "" {
				in.CapacityReservationIds = []string{term.ID}
			}
			if term.OwnerID != "" {
				in.Filters = append(in.Filters, filter("owner-id", term.OwnerID))
			}
			if term.InstanceMatchCriteria != "" {
				in.Filters = append(in.Filters, filter("instance-match-criteria", term.InstanceMatchCriteria))
			}
			var out []ec2types.CapacityReservation
			pages := ec2.NewDescribeCapacityReservationsPaginator(c.ec2, in)
			for pages.HasMorePages() {
				page, err := pages.NextPage(ctx)
				if errorCode(err) == "InvalidCapacityReservationId.NotFound" {
					break
				}
				if err != nil {
					return nil, wrapAPI("ec2:DescribeCapacityReservations", err)
				}
				out = append(out, page.CapacityReservations...)
			}
			return out, nil
		})
	}, func(cr ec2types.CapacityReservation) string { return aws.ToString(cr.CapacityReservationId) },
		func(term awsv1.CapacityReservationSelectorTerm) string {
			return explainTerm(term.Tags, "id", term.ID, "ownerID", term.OwnerID, "instanceMatchCriteria", term.InstanceMatchCriteria)
		})
	slices.SortFunc(res.items, func(a, b ec2types.CapacityReservation) int {
		return strings.Compare(aws.ToString(a.CapacityReservationId), aws.ToString(b.CapacityReservationId))
	})
	return res, err
}

// capacityReservationStatus converts reservations for status; a capacity block within
// capacityBlockExpiringWindow of its end is "expiring".
func capacityReservationStatus(crs []ec2types.CapacityReservation, now time.Time) []awsv1.CapacityReservation {
	out := make([]awsv1.CapacityReservation, 0, len(crs))
	for _, cr := range crs {
		s := awsv1.CapacityReservation{
			AvailabilityZone:      aws.ToString(cr.AvailabilityZone),
			ID:                    aws.ToString(cr.CapacityReservationId),
			InstanceMatchCriteria: string(cr.InstanceMatchCriteria),
			InstanceType:          aws.ToString(cr.InstanceType),
			OwnerID:               aws.ToString(cr.OwnerId),
			ReservationType:       awsv1.CapacityReservationTypeDefault,
			Interruptible:         aws.ToBool(cr.Interruptible),
			State:                 awsv1.CapacityReservationStateActive,
		}
		if cr.ReservationType == ec2types.CapacityReservationTypeCapacityBlock {
			s.ReservationType = awsv1.CapacityReservationTypeCapacityBlock
		}
		if cr.EndDate != nil {
			end := metav1.NewTime(cr.EndDate.UTC())
			s.EndTime = &end
			if s.ReservationType == awsv1.CapacityReservationTypeCapacityBlock && !now.Before(cr.EndDate.Add(-capacityBlockExpiringWindow)) {
				s.State = awsv1.CapacityReservationStateExpiring
			}
		}
		out = append(out, s)
	}
	return out
}
