package nodeclass

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
)

// termResult is what the terms of one selector list resolved to: the items, deduplicated, and
// the terms that matched nothing (described for condition messages).
type termResult[T any] struct {
	items     []T
	unmatched []string
}

// resolveTerms runs describe for every term and merges the results by id. A term's error stops
// the resolution.
func resolveTerms[Term, T any](terms []Term, field string, describe func(Term) ([]T, error), id func(T) string, explain func(Term) string) (termResult[T], error) {
	var out termResult[T]
	seen := map[string]bool{}
	for i, term := range terms {
		items, err := describe(term)
		if err != nil {
			return termResult[T]{}, err
		}
		if len(items) == 0 {
			out.unmatched = append(out.unmatched, fmt.Sprintf("%s[%d] (%s)", field, i, explain(term)))
		}
		for _, item := range items {
			if k := id(item); !seen[k] {
				seen[k] = true
				out.items = append(out.items, item)
			}
		}
	}
	return out, nil
}

// tagFilters turns selector tags into EC2 filters: a value of "*" matches any value of the key.
func tagFilters(tags map[string]string) []ec2types.Filter {
	keys := slices.Sorted(maps.Keys(tags))
	out := make([]ec2types.Filter, 0, len(keys))
	for _, k := range keys {
		if tags[k] == "*" {
			out = append(out, ec2types.Filter{Name: aws.String("tag-key"), Values: []string{k}})
			continue
		}
		out = append(out, ec2types.Filter{Name: aws.String("tag:" + k), Values: []string{tags[k]}})
	}
	return out
}

func filter(name string, values ...string) ec2types.Filter {
	return ec2types.Filter{Name: aws.String(name), Values: values}
}

// explainTerm renders the set fields of a selector term for a message, such as
// "id sg-1" or "name web; tags karpenter.sh/discovery=demo, team=*". fields are name, value pairs.
func explainTerm(tags map[string]string, fields ...string) string {
	var parts []string
	for i := 0; i+1 < len(fields); i += 2 {
		if fields[i+1] != "" {
			parts = append(parts, fields[i]+" "+fields[i+1])
		}
	}
	if len(tags) > 0 {
		pairs := make([]string, 0, len(tags))
		for _, k := range slices.Sorted(maps.Keys(tags)) {
			pairs = append(pairs, k+"="+tags[k])
		}
		parts = append(parts, "tags "+strings.Join(pairs, ", "))
	}
	return strings.Join(parts, "; ")
}

// cacheKey is a stable key for a query value (maps encode with sorted keys).
func cacheKey(kind string, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return kind + fmt.Sprintf("%#v", v)
	}
	return kind + ":" + string(b)
}
