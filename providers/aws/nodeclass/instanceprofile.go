package nodeclass

import (
	"context"
	"fmt"
	"hash/fnv"
	"maps"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/iam"
	iamtypes "github.com/aws/aws-sdk-go-v2/service/iam/types"

	awsv1 "github.com/joiner-dev/joiner/api/aws/v1"
)

// TagRegion is the tag carrying the region on the instance profiles the controller creates.
const TagRegion = "topology.kubernetes.io/region"

// profileProblem is an instance profile the class cannot use, with the reason and message of
// InstanceProfileReady=False.
type profileProblem struct {
	reason, message string
}

func (p *profileProblem) Error() string { return p.message }

// managedProfileName is the name of the instance profile the controller creates for a class with
// spec.role: "<cluster>_<hash of region, class name and UID>", at most 128 characters.
func managedProfileName(cluster, region string, nc *awsv1.EC2NodeClass) string {
	h := fnv.New64a()
	_, _ = fmt.Fprintf(h, "%s/%s/%s", region, nc.Name, nc.UID)
	suffix := fmt.Sprintf("_%d", h.Sum64())
	if len(cluster)+len(suffix) > 128 {
		cluster = cluster[:128-len(suffix)]
	}
	return cluster + suffix
}

// managedProfilePath scopes the profiles the controller creates, so they are easy to audit.
func managedProfilePath(cluster, region string, nc *awsv1.EC2NodeClass) string {
	return fmt.Sprintf("/karpenter/%s/%s/%s/", region, cluster, nc.UID)
}

// roleName accepts a role name, a path-qualified name or a role ARN, and returns the name.
func roleName(role string) string {
	role = strings.TrimSuffix(role, "/")
	if i := strings.LastIndex(role, "/"); i >= 0 {
		return role[i+1:]
	}
	return role
}

// instanceProfile returns the instance profile the class's instances use: spec.instanceProfile
// when it exists, or the profile the controller manages for spec.role (name), created, tagged
// and holding exactly that role. Results are cached for the instance profile TTL.
func (c *Controller) instanceProfile(ctx context.Context, nc *awsv1.EC2NodeClass, managed string) (string, error) {
	if nc.Spec.InstanceProfile != nil {
		name := *nc.Spec.InstanceProfile
		if strings.HasPrefix(name, "arn:") {
			return "", &profileProblem{reason: awsv1.ReasonInstanceProfileNotFound, message: fmt.Sprintf(
				"spec.instanceProfile %s is an ARN: set the instance profile's name, %s", name, roleName(name))}
		}
		key := "given/" + name
		if _, ok := c.profileCache.get(key); ok {
			return name, nil
		}
		_, err := c.iam.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
		if errorCode(err) == "NoSuchEntity" {
			return "", &profileProblem{reason: awsv1.ReasonInstanceProfileNotFound, message: fmt.Sprintf(
				"spec.instanceProfile: instance profile %s does not exist: create it, or set spec.role for Joiner to manage one", name)}
		}
		if err != nil {
			return "", wrapAPI("iam:GetInstanceProfile", err)
		}
		c.profileCache.set(key, true)
		return name, nil
	}
	role := roleName(nc.Spec.Role)
	key := "managed/" + managed + "/" + role + "/" + cacheKey("tags", nc.Spec.Tags)
	if _, ok := c.profileCache.get(key); ok {
		return managed, nil
	}
	profile, err := c.ensureProfile(ctx, nc, managed)
	if err != nil {
		return "", err
	}
	if err := c.ensureRole(ctx, profile, role); err != nil {
		return "", err
	}
	c.profileCache.set(key, true)
	return managed, nil
}

// profileTags are the tags of a managed instance profile: the class's spec.tags and the
// provider's own.
func (c *Controller) profileTags(nc *awsv1.EC2NodeClass) map[string]string {
	tags := maps.Clone(nc.Spec.Tags)
	if tags == nil {
		tags = map[string]string{}
	}
	tags[awsv1.TagNodeClass] = nc.Name
	tags[awsv1.TagEKSClusterName] = c.opts.ClusterName
	tags[awsv1.TagKubernetesClusterPrefix+c.opts.ClusterName] = "owned"
	tags[TagRegion] = c.opts.Region
	return tags
}

// ensureProfile gets the managed profile, creating it when missing and adding missing tags.
func (c *Controller) ensureProfile(ctx context.Context, nc *awsv1.EC2NodeClass, name string) (*iamtypes.InstanceProfile, error) {
	want := c.profileTags(nc)
	out, err := c.iam.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if errorCode(err) == "NoSuchEntity" {
		created, cerr := c.iam.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{
			InstanceProfileName: aws.String(name), Path: aws.String(managedProfilePath(c.opts.ClusterName, c.opts.Region, nc)), Tags: iamTags(want)})
		if cerr == nil {
			return created.InstanceProfile, nil
		}
		if errorCode(cerr) != "EntityAlreadyExists" {
			return nil, wrapAPI("iam:CreateInstanceProfile", cerr)
		}
		out, err = c.iam.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	}
	if err != nil {
		return nil, wrapAPI("iam:GetInstanceProfile", err)
	}
	have := map[string]string{}
	for _, t := range out.InstanceProfile.Tags {
		have[aws.ToString(t.Key)] = aws.ToString(t.Value)
	}
	missing := map[string]string{}
	for k, v := range want {
		if have[k] != v {
			missing[k] = v
		}
	}
	if len(missing) > 0 {
		if _, err := c.iam.TagInstanceProfile(ctx, &iam.TagInstanceProfileInput{InstanceProfileName: aws.String(name), Tags: iamTags(missing)}); err != nil {
			return nil, wrapAPI("iam:TagInstanceProfile", err)
		}
	}
	return out.InstanceProfile, nil
}

// ensureRole makes role the only role of the profile.
func (c *Controller) ensureRole(ctx context.Context, profile *iamtypes.InstanceProfile, role string) error {
	name := aws.ToString(profile.InstanceProfileName)
	has := false
	for _, r := range profile.Roles {
		if aws.ToString(r.RoleName) == role {
			has = true
			continue
		}
		if _, err := c.iam.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{
			InstanceProfileName: aws.String(name), RoleName: r.RoleName}); err != nil && errorCode(err) != "NoSuchEntity" {
			return wrapAPI("iam:RemoveRoleFromInstanceProfile", err)
		}
	}
	if has {
		return nil
	}
	_, err := c.iam.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String(role)})
	switch errorCode(err) {
	case "":
		return nil
	case "NoSuchEntity":
		return &profileProblem{reason: "RoleNotFound", message: fmt.Sprintf(
			"spec.role: IAM role %s does not exist: create it (with an ec2.amazonaws.com trust policy) or fix spec.role", role)}
	case "AccessDenied", "AccessDeniedException":
		return &profileProblem{reason: "RoleNotPassable", message: fmt.Sprintf(
			"spec.role: Joiner may not add IAM role %s to instance profile %s (%v): grant Joiner iam:PassRole and iam:AddRoleToInstanceProfile on it", role, name, err)}
	}
	return wrapAPI("iam:AddRoleToInstanceProfile", err)
}

// deleteManagedProfile deletes the instance profile the controller created for the class,
// after removing its roles. A profile that is gone, or that does not carry the class's tag (not
// created by Joiner for this class), is left alone.
func (c *Controller) deleteManagedProfile(ctx context.Context, nc *awsv1.EC2NodeClass, name string) error {
	out, err := c.iam.GetInstanceProfile(ctx, &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if errorCode(err) == "NoSuchEntity" {
		return nil
	}
	if err != nil {
		return wrapAPI("iam:GetInstanceProfile", err)
	}
	owned := false
	for _, t := range out.InstanceProfile.Tags {
		if aws.ToString(t.Key) == awsv1.TagNodeClass && aws.ToString(t.Value) == nc.Name {
			owned = true
		}
	}
	if !owned {
		return nil
	}
	for _, r := range out.InstanceProfile.Roles {
		if _, err := c.iam.RemoveRoleFromInstanceProfile(ctx, &iam.RemoveRoleFromInstanceProfileInput{
			InstanceProfileName: aws.String(name), RoleName: r.RoleName}); err != nil && errorCode(err) != "NoSuchEntity" {
			return wrapAPI("iam:RemoveRoleFromInstanceProfile", err)
		}
	}
	if _, err := c.iam.DeleteInstanceProfile(ctx, &iam.DeleteInstanceProfileInput{InstanceProfileName: aws.String(name)}); err != nil && errorCode(err) != "NoSuchEntity" {
		return wrapAPI("iam:DeleteInstanceProfile", err)
	}
	return nil
}

func iamTags(tags map[string]string) []iamtypes.Tag {
	out := make([]iamtypes.Tag, 0, len(tags))
	for _, k := range slices.Sorted(maps.Keys(tags)) {
		out = append(out, iamtypes.Tag{Key: aws.String(k), Value: aws.String(tags[k])})
	}
	return out
}
