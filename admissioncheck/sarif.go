package admissioncheck

import (
	"io"
	"net/url"
	"path/filepath"

	"github.com/joiner-dev/joiner/policy/offline"
)

// SARIF 2.1.0 (the OASIS standard; testdata/sarif-schema-2.1.0.json), the subset a check fills.
const (
	sarifSchema  = "https://json.schemastore.org/sarif-2.1.0.json"
	sarifVersion = "2.1.0"
)

type sarifLog struct {
	Schema  string     `json:"$schema"`
	Version string     `json:"version"`
	Runs    []sarifRun `json:"runs"`
}

type sarifRun struct {
	Tool    sarifTool     `json:"tool"`
	Results []sarifResult `json:"results"`
}

type sarifTool struct {
	Driver sarifDriver `json:"driver"`
}

type sarifDriver struct {
	Name           string      `json:"name"`
	InformationURI string      `json:"informationUri"`
	Rules          []sarifRule `json:"rules"`
}

type sarifRule struct {
	ID string `json:"id"`
}

type sarifResult struct {
	RuleID    string          `json:"ruleId"`
	RuleIndex int             `json:"ruleIndex"`
	Level     string          `json:"level"`
	Message   sarifMessage    `json:"message"`
	Locations []sarifLocation `json:"locations"`
}

type sarifMessage struct {
	Text string `json:"text"`
}

type sarifLocation struct {
	PhysicalLocation sarifPhysical  `json:"physicalLocation"`
	LogicalLocations []sarifLogical `json:"logicalLocations,omitempty"`
}

type sarifPhysical struct {
	ArtifactLocation sarifArtifact `json:"artifactLocation"`
	Region           sarifRegion   `json:"region"`
}

type sarifArtifact struct {
	URI string `json:"uri"`
}

type sarifRegion struct {
	StartLine int `json:"startLine"`
}

type sarifLogical struct {
	FullyQualifiedName string `json:"fullyQualifiedName"`
	Kind               string `json:"kind"`
}

// sarifLevel maps a problem's action to a result level.
var sarifLevel = map[string]string{ActionError: "error", ActionDeny: "error", ActionWarn: "warning", ActionDryRun: "note"}

// writeSARIF prints the report as a SARIF 2.1.0 log with one run: one result per problem (denials,
// errors, warnings, recorded violations), whose rule is the policy or the check that gave it and whose
// location is the line where the object's document starts.
func writeSARIF(w io.Writer, rep *Report) error {
	driver := sarifDriver{Name: "joiner check", InformationURI: "https://github.com/joiner-dev/joiner", Rules: []sarifRule{}}
	rules := map[string]int{}
	results := []sarifResult{}
	for _, o := range rep.Objects {
		for _, p := range sortedProblems(o) {
			id := ruleID(p)
			i, ok := rules[id]
			if !ok {
				i = len(driver.Rules)
				rules[id] = i
				driver.Rules = append(driver.Rules, sarifRule{ID: id})
			}
			results = append(results, sarifResult{
				RuleID: id, RuleIndex: i, Level: sarifLevel[p.Action], Message: sarifMessage{Text: p.Message},
				Locations: []sarifLocation{{
					PhysicalLocation: sarifPhysical{ArtifactLocation: sarifArtifact{URI: fileURI(fileOf(o))}, Region: sarifRegion{StartLine: lineOf(o)}},
					LogicalLocations: []sarifLogical{{FullyQualifiedName: objectName(o), Kind: "object"}},
				}},
			})
		}
	}
	return offline.WriteJSON(w, sarifLog{Schema: sarifSchema, Version: sarifVersion, Runs: []sarifRun{{Tool: sarifTool{Driver: driver}, Results: results}}})
}

// fileURI is a file path as a relative (or absolute) URI reference, escaped.
func fileURI(path string) string {
	return (&url.URL{Path: filepath.ToSlash(path)}).String()
}
