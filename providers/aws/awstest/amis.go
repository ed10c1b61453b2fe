package awstest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// Owners of the AMIs AWS publishes (moto also gives them the owner alias "amazon").
const (
	// OwnerEKS is the account that publishes the EKS-optimized Amazon Linux and Bottlerocket AMIs.
	OwnerEKS = "602401143452"
	// OwnerWindows is the account that publishes the Windows AMIs.
	OwnerWindows = "801119661308"
)

// PublishedKubernetesVersions are the Kubernetes versions PublishedAMIs has AMIs for. AL2 AMIs
// exist only for 1.32, the last version AWS built them for, as in real AWS.
var PublishedKubernetesVersions = []string{"1.32", "1.35", "1.36"}

// Release versions of the published AMIs, oldest first; the last is what "latest" and
// "recommended" parameters point at.
var (
	AmazonLinuxReleases  = []string{"v20260801", "v20260901"}
	BottlerocketReleases = []string{"1.44.0", "1.45.0"}
)

// PublishedAMI is an EKS-optimized AMI that moto serves as published by Amazon, with the SSM
// parameters AWS publishes for it.
type PublishedAMI struct {
	// ID is deterministic: the same name always has the same ID.
	ID   string
	Name string
	// Family is the spec.amiFamily value: AL2023, AL2, Bottlerocket or Windows2022.
	Family            string
	KubernetesVersion string
	// Release is the AMI release ("v20260901" for Amazon Linux, "1.45.0" for Bottlerocket).
	Release string
	// Arch is the EC2 architecture: x86_64 or arm64.
	Arch string
	// Variant is "standard", or "nvidia" for GPU AMIs.
	Variant      string
	Owner        string
	Platform     string // "windows" or ""
	CreationDate time.Time
	// Parameters are the SSM parameter names whose value is ID (the pinned-release parameter,
	// and the recommended/latest one for the newest release).
	Parameters []string
}

var published = buildPublished()

// PublishedAMIs returns the AMIs moto serves as published by Amazon, in a stable order.
func PublishedAMIs() []PublishedAMI { return slices.Clone(published.amis) }

// PublishedParameter returns the value of an SSM parameter AWS publishes for an AMI, such as
// /aws/service/eks/optimized-ami/1.36/amazon-linux-2023/x86_64/standard/recommended/image_id.
func PublishedParameter(name string) (string, bool) {
	id, ok := published.params[name]
	return id, ok
}

// FindPublishedAMI returns the published AMI with the family, Kubernetes version, release
// ("" for the newest), architecture and variant.
func FindPublishedAMI(family, k8s, release, arch, variant string) (PublishedAMI, bool) {
	for _, a := range published.amis {
		if a.Family == family && a.KubernetesVersion == k8s && a.Arch == arch && a.Variant == variant &&
			(a.Release == release || release == "" && a.latest()) {
			return a, true
		}
	}
	return PublishedAMI{}, false
}

func (a PublishedAMI) latest() bool {
	switch a.Family {
	case "Bottlerocket":
		return a.Release == BottlerocketReleases[len(BottlerocketReleases)-1]
	case "Windows2022":
		return true // one release per Kubernetes version
	default:
		return a.Release == AmazonLinuxReleases[len(AmazonLinuxReleases)-1]
	}
}

type publishedSet struct {
	amis   []PublishedAMI
	params map[string]string
}

func buildPublished() publishedSet {
	var out publishedSet
	out.params = map[string]string{}
	add := func(a PublishedAMI) {
		sum := sha256.Sum256([]byte(a.Name))
		a.ID = "ami-" + hex.EncodeToString(sum[:])[:17]
		for _, p := range a.Parameters {
			out.params[p] = a.ID
		}
		out.amis = append(out.amis, a)
	}
	base := time.Date(2026, 8, 1, 0, 0, 0, 0, time.UTC)
	for _, k := range PublishedKubernetesVersions {
		for ri, rel := range AmazonLinuxReleases {
			created := base.AddDate(0, ri, 0)
			last := ri == len(AmazonLinuxReleases)-1
			for _, arch := range []string{"x86_64", "arm64"} {
				for _, variant := range []string{"standard", "nvidia"} {
					dir := fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2023/%s/%s/", k, arch, variant)
					name := fmt.Sprintf("amazon-eks-node-al2023-%s-%s-%s-%s", arch, variant, k, rel)
					params := []string{dir + name + "/image_id"}
					if last {
						params = append(params, dir+"recommended/image_id")
					}
					add(PublishedAMI{Name: name, Family: "AL2023", KubernetesVersion: k, Release: rel, Arch: arch, Variant: variant,
						Owner: OwnerEKS, CreationDate: created, Parameters: params})
				}
			}
			if k != "1.32" {
				continue
			}
			for _, al2 := range []struct{ suffix, prefix, arch, variant string }{
				{"", "", "x86_64", "standard"}, {"-arm64", "arm64-", "arm64", "standard"}, {"-gpu", "gpu-", "x86_64", "nvidia"},
			} {
				dir := fmt.Sprintf("/aws/service/eks/optimized-ami/%s/amazon-linux-2%s/", k, al2.suffix)
				name := fmt.Sprintf("amazon-eks-%snode-%s-%s", al2.prefix, k, rel)
				params := []string{dir + name + "/image_id"}
				if last {
					params = append(params, dir+"recommended/image_id")
				}
				add(PublishedAMI{Name: name, Family: "AL2", KubernetesVersion: k, Release: rel, Arch: al2.arch, Variant: al2.variant,
					Owner: OwnerEKS, CreationDate: created, Parameters: params})
			}
		}
		for ri, rel := range BottlerocketReleases {
			created := base.AddDate(0, ri, 1)
			last := ri == len(BottlerocketReleases)-1
			for _, arch := range []string{"x86_64", "arm64"} {
				for _, variant := range []string{"standard", "nvidia"} {
					flavor := ""
					if variant == "nvidia" {
						flavor = "-nvidia"
					}
					dir := fmt.Sprintf("/aws/service/bottlerocket/aws-k8s-%s%s/%s/", k, flavor, arch)
					params := []string{dir + rel + "/image_id"}
					if last {
						params = append(params, dir+"latest/image_id")
					}
					add(PublishedAMI{Name: fmt.Sprintf("bottlerocket-aws-k8s-%s%s-%s-v%s", k, flavor, arch, rel), Family: "Bottlerocket",
						KubernetesVersion: k, Release: rel, Arch: arch, Variant: variant, Owner: OwnerEKS, CreationDate: created, Parameters: params})
				}
			}
		}
		add(PublishedAMI{Name: fmt.Sprintf("Windows_Server-2022-English-Core-EKS_Optimized-%s-2026.09.10", k), Family: "Windows2022",
			KubernetesVersion: k, Release: "2026.09.10", Arch: "x86_64", Variant: "standard", Owner: OwnerWindows, Platform: "windows",
			CreationDate: base.AddDate(0, 1, 9),
			Parameters:   []string{fmt.Sprintf("/aws/service/ami-windows-latest/Windows_Server-2022-English-Core-EKS_Optimized-%s/image_id", k)}})
	}
	return out
}

// writeMotoAMIs writes the published AMIs in the format moto reads from MOTO_AMIS_PATH, and
// returns the file's path.
func writeMotoAMIs(dir string) (string, error) {
	type motoAMI struct {
		AMIID              string `json:"ami_id"`
		State              string `json:"state"`
		Public             bool   `json:"public"`
		OwnerID            string `json:"owner_id"`
		ImageLocation      string `json:"image_location"`
		RootDeviceType     string `json:"root_device_type"`
		RootDeviceName     string `json:"root_device_name"`
		Description        string `json:"description"`
		ImageType          string `json:"image_type"`
		Platform           string `json:"platform,omitempty"`
		Architecture       string `json:"architecture"`
		Name               string `json:"name"`
		VirtualizationType string `json:"virtualization_type"`
		Hypervisor         string `json:"hypervisor"`
		CreationDate       string `json:"creation_date"`
	}
	var rows []motoAMI
	for _, a := range published.amis {
		rows = append(rows, motoAMI{
			AMIID: a.ID, State: "available", Public: true, OwnerID: a.Owner, ImageLocation: "amazon/" + a.Name,
			RootDeviceType: "ebs", RootDeviceName: "/dev/xvda", ImageType: "machine", Platform: a.Platform,
			Description:  fmt.Sprintf("EKS-optimized %s AMI for Kubernetes %s (%s)", a.Family, a.KubernetesVersion, strings.TrimPrefix(a.Release, "v")),
			Architecture: a.Arch, Name: a.Name, VirtualizationType: "hvm", Hypervisor: "xen",
			CreationDate: a.CreationDate.Format("2006-01-02T15:04:05.000Z"),
		})
	}
	b, err := json.Marshal(rows)
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "amis.json")
	return path, os.WriteFile(path, b, 0o600)
}
