package v1

import (
	"fmt"
	"strings"
)

// AliasVersionLatest is the alias version that tracks the newest release of an AMI family.
const AliasVersionLatest = "latest"

// Alias is a parsed amiSelectorTerms[].alias: the AMI family (as spelled in spec.amiFamily, for example
// "AL2023") and the version ("latest" or a release version).
//
// +kubebuilder:object:generate=false
type Alias struct {
	// Family is the AMI family, one of the AMIFamily constants other than AMIFamilyCustom.
	Family string
	// Version is AliasVersionLatest or a pinned release version.
	Version string
}

// String renders the alias in its "family@version" form with the lower-case family.
func (a Alias) String() string {
	return strings.ToLower(a.Family) + "@" + a.Version
}

// aliasFamilies maps the lower-case family of an alias to its AMIFamily value.
var aliasFamilies = map[string]string{
	"al2":          AMIFamilyAL2,
	"al2023":       AMIFamilyAL2023,
	"bottlerocket": AMIFamilyBottlerocket,
	"windows2019":  AMIFamilyWindows2019,
	"windows2022":  AMIFamilyWindows2022,
	"windows2025":  AMIFamilyWindows2025,
}

// ParseAlias parses "family@version". It accepts what the CRD accepts: a known lower-case family, a
// non-empty version, and only "latest" for Windows families.
func ParseAlias(s string) (Alias, error) {
	family, version, ok := strings.Cut(s, "@")
	if !ok || family == "" || version == "" {
		return Alias{}, fmt.Errorf("alias %q: want the form family@version", s)
	}
	name, known := aliasFamilies[family]
	if !known {
		return Alias{}, fmt.Errorf("alias %q: unsupported family %q, want one of al2, al2023, bottlerocket, windows2019, windows2022, windows2025", s, family)
	}
	if strings.HasPrefix(family, "windows") && version != AliasVersionLatest {
		return Alias{}, fmt.Errorf("alias %q: windows families only accept version %q", s, AliasVersionLatest)
	}
	return Alias{Family: name, Version: version}, nil
}

// Alias returns the parsed alias of the first amiSelectorTerm that has one. It returns false when no term
// has an alias or the alias does not parse.
func (in *EC2NodeClass) Alias() (Alias, bool) {
	for _, term := range in.Spec.AMISelectorTerms {
		if term.Alias == "" {
			continue
		}
		alias, err := ParseAlias(term.Alias)
		return alias, err == nil
	}
	return Alias{}, false
}

// AMIFamily returns the effective AMI family: spec.amiFamily when set, else the family of the alias
// term. It returns AMIFamilyCustom when neither is available, which the CRD rules prevent.
func (in *EC2NodeClass) AMIFamily() string {
	if in.Spec.AMIFamily != nil {
		return *in.Spec.AMIFamily
	}
	if alias, ok := in.Alias(); ok {
		return alias.Family
	}
	return AMIFamilyCustom
}
