package disruption

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	"github.com/joiner-dev/joiner/controllers/disruption/planner"
)

// Output formats of WritePlans.
const (
	OutputText = "text"
	OutputJSON = "json"
)

// PlanReport is the JSON form of a dry run: one entry per pass, then why every node the first
// pass looked at was left alone.
type PlanReport struct {
	Passes []PassReport      `json:"passes"`
	Nodes  []planner.Verdict `json:"nodesLeftAlone"`
}

// PassReport is one pass of a dry run.
type PassReport struct {
	Pass         int      `json:"pass"`
	Command      string   `json:"command,omitempty"`
	Decision     string   `json:"decision,omitempty"`
	Reason       string   `json:"reason,omitempty"`
	Type         string   `json:"consolidationType,omitempty"`
	Nodes        []string `json:"nodes,omitempty"`
	Replacements []string `json:"replacements,omitempty"`
	SavingsPerH  float64  `json:"savingsPerHour,omitempty"`
}

// Report turns the plans of a dry run into its report.
func Report(plans []*planner.Plan) PlanReport {
	r := PlanReport{Nodes: []planner.Verdict{}}
	for i, p := range plans {
		if p.Command == nil {
			continue
		}
		pr := PassReport{Pass: i + 1, Command: p.Command.String(), Decision: p.Command.Decision(), Reason: string(p.Command.Reason),
			Type: p.Command.Type, SavingsPerH: p.Command.Savings}
		for _, c := range p.Command.Candidates {
			pr.Nodes = append(pr.Nodes, c.Name())
		}
		for _, rep := range p.Command.Replacements {
			names := rep.InstanceTypeNames()
			if len(names) > 5 {
				names = append(names[:5:5], fmt.Sprintf("and %d more", len(names)-5))
			}
			pr.Replacements = append(pr.Replacements, fmt.Sprintf("%s (%v, from $%.4f/h)", rep.NodePool.Name, names, rep.Price))
		}
		r.Passes = append(r.Passes, pr)
	}
	if len(plans) > 0 {
		r.Nodes = append(r.Nodes, plans[0].Verdicts...)
		sort.SliceStable(r.Nodes, func(i, j int) bool { return r.Nodes[i].Node < r.Nodes[j].Node })
	}
	return r
}

// WritePlans writes the dry-run report in the format (OutputText or OutputJSON).
func WritePlans(w io.Writer, plans []*planner.Plan, format string) error {
	r := Report(plans)
	switch format {
	case OutputJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		if err := enc.Encode(r); err != nil {
			return fmt.Errorf("write the plan: %w", err)
		}
		return nil
	case OutputText:
	default:
		return fmt.Errorf("output format %q is not supported; use %s or %s", format, OutputText, OutputJSON)
	}
	if len(r.Passes) == 0 {
		fmt.Fprintln(w, "No disruption: the next pass would do nothing.")
	}
	for _, p := range r.Passes {
		fmt.Fprintf(w, "Pass %d: %s\n", p.Pass, p.Command)
		for _, rep := range p.Replacements {
			fmt.Fprintf(w, "  replacement: %s\n", rep)
		}
	}
	if len(r.Nodes) == 0 {
		return nil
	}
	fmt.Fprintln(w, "\nNodes the next pass leaves alone:")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "NODE\tNODECLAIM\tREASON\tWHY")
	for _, v := range r.Nodes {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", v.Node, v.NodeClaim, v.Reason, v.Message)
	}
	if err := tw.Flush(); err != nil {
		return fmt.Errorf("write the plan: %w", err)
	}
	return nil
}
