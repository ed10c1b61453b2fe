package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/agnivade/levenshtein"
)

// settingFlag is the flag.Value of a row of the settings table. It only records the text given on
// the command line: resolve parses it, or else the environment variable, or else the default, with
// the row's own apply, so that the three are parsed alike.
type settingFlag struct {
	row   *setting
	text  string
	isSet bool
}

// String is the text given, else the row's default (the flag package shows it as the default).
func (v *settingFlag) String() string {
	if v == nil || v.row == nil {
		return ""
	}
	if v.isSet {
		return v.text
	}
	return v.row.def
}

// Set records the text; resolve checks it.
func (v *settingFlag) Set(s string) error {
	v.text, v.isSet = s, true
	return nil
}

// IsBoolFlag lets a bool setting be given as a bare --flag, meaning true.
func (v *settingFlag) IsBoolFlag() bool { return v != nil && v.row != nil && v.row.kind == kindBool }

// settingsBinding is the settings table bound to one FlagSet.
type settingsBinding struct {
	fs    *flag.FlagSet
	flags []*settingFlag
	// printSettings is --print-settings.
	printSettings bool
}

// bindSettings defines a flag for every row of the table on fs, and --print-settings.
func bindSettings(fs *flag.FlagSet) *settingsBinding {
	b := &settingsBinding{fs: fs}
	for i := range settingsTable {
		row := &settingsTable[i]
		v := &settingFlag{row: row}
		b.flags = append(b.flags, v)
		fs.Var(v, row.flag, helpText(row))
	}
	fs.BoolVar(&b.printSettings, "print-settings", false,
		"print every setting Karpenter's names reach (flag, environment variable, value, where the value came from, what it does in Joiner) and every feature gate, then exit")
	return b
}

// helpText is a row's usage with its environment variable, value kind and, for a setting Joiner
// accepts without acting on it, why.
func helpText(row *setting) string {
	kind := "true or false"
	if row.kind != kindBool {
		kind = "`" + row.kind + "`"
	}
	text := fmt.Sprintf("%s [%s: %s]", row.usage, row.env, kind)
	if row.effect != supported {
		text += "; " + row.effect.String() + ": " + row.note
	}
	return text
}

// resolve gives every setting its value, from its flag, else its environment variable (read with
// lookup), else its default, and applies it to f. It then applies what depends on several
// settings (finish) and checks environ for misspelt setting variables.
func (b *settingsBinding) resolve(f *controllerFlags, lookup func(string) (string, bool), environ []string) error {
	f.karp.given = map[string]givenValue{}
	for _, v := range b.flags {
		g := givenValue{text: v.row.def, from: "default"}
		if v.isSet {
			g = givenValue{text: v.text, from: "flag"}
		} else if e, ok := lookup(v.row.env); ok {
			g = givenValue{text: e, from: "env"}
		}
		if err := v.row.apply(f, g.text); err != nil {
			return settingError(v.row, g, err)
		}
		f.karp.given[v.row.flag] = g
		if v.row.effect != supported && g.from != "default" && g.text != v.row.def {
			f.karp.notes = append(f.karp.notes, fmt.Sprintf("%s=%s (from %s): %s: %s", v.row.flag, g.text, sourceName(v.row, g), v.row.effect, v.row.note))
		}
	}
	if err := checkEnvNames(environ); err != nil {
		return err
	}
	return b.finish(f)
}

// settingError names where a bad value came from.
func settingError(row *setting, g givenValue, err error) error {
	if g.from == "env" {
		return fmt.Errorf("environment variable %s=%q: %w", row.env, g.text, err)
	}
	return fmt.Errorf("--%s %q: %w", row.flag, g.text, err)
}

// sourceName says where a value came from, for logs and --print-settings.
func sourceName(row *setting, g givenValue) string {
	switch g.from {
	case "flag":
		return "--" + row.flag
	case "env":
		return row.env
	}
	return "default"
}

// finish applies what depends on several settings or on Joiner's own flags: the ports unless the
// bind addresses are given, leader election, the CPU request, and the feature gates.
func (b *settingsBinding) finish(f *controllerFlags) error {
	visited := map[string]bool{}
	b.fs.Visit(func(fl *flag.Flag) { visited[fl.Name] = true })
	for _, p := range []struct {
		port, addrFlag string
		n              int
		addr           *string
	}{
		{"metrics-port", "metrics-bind-address", f.karp.metricsPort, &f.opts.MetricsAddr},
		{"health-probe-port", "health-probe-bind-address", f.karp.probePort, &f.opts.ProbeAddr},
	} {
		switch from := f.karp.given[p.port].from; {
		case visited[p.addrFlag] && from == "flag":
			return fmt.Errorf("--%s and --%s both set where to listen: give one", p.port, p.addrFlag)
		case !visited[p.addrFlag]:
			*p.addr = ":" + strconv.Itoa(p.n)
		}
	}
	if f.karp.disableLeaderElection {
		if visited["leader-elect"] && f.opts.LeaderElect && f.karp.given["disable-leader-election"].from == "flag" {
			return errors.New("--leader-elect=true and --disable-leader-election=true disagree: give one")
		}
		if !visited["leader-elect"] {
			f.opts.LeaderElect = false
		}
	}
	if n := f.karp.cpuRequests; n > 0 && !visited["consolidation-workers"] {
		f.opts.Controllers.Disruption.Planner.Workers = int(math.Ceil(float64(n) / 1000))
	}
	return applyGates(f, visited)
}

// checkEnvNames returns an error for a variable of environ whose name is a setting's misspelt
// (within two edits of one, and not one itself), naming the setting meant. Kubernetes service link
// variables (a tcp:// or udp:// value) are left alone, whatever a Service is named.
func checkEnvNames(environ []string) error {
	known := knownEnvNames()
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		if len(name) < 8 || strings.Contains(value, "://") || strings.ToUpper(name) != name || known[name] {
			continue
		}
		best, d := nearest(name, keys(known))
		if d > 0 && d <= 2 {
			return fmt.Errorf("environment variable %s is not a setting; did you mean %s? (rename or unset it)", name, best)
		}
	}
	return nil
}

// knownEnvNames are the variables `joiner controller` reads (the table's and Joiner's own), and
// those Karpenter's chart sets that Joiner has no use for (SYSTEM_NAMESPACE, KUBERNETES_MIN_VERSION).
func knownEnvNames() map[string]bool {
	known := map[string]bool{"POD_NAMESPACE": true, "JOINER_MEMORY_LIMIT": true, "SYSTEM_NAMESPACE": true, "KUBERNETES_MIN_VERSION": true}
	for _, row := range settingsTable {
		known[row.env] = true
	}
	return known
}

func keys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	return out
}

// nearest returns the candidate closest to s by edit distance (ties: the first in sorted order),
// and the distance.
func nearest(s string, candidates []string) (string, int) {
	best, bestD := "", math.MaxInt
	for _, c := range candidates {
		d := levenshtein.ComputeDistance(s, c)
		if d < bestD || (d == bestD && c < best) {
			best, bestD = c, d
		}
	}
	return best, bestD
}

// nearestHint is "; did you mean X?" for the candidate nearest to s.
func nearestHint(s string, candidates []string) string {
	best, _ := nearest(s, candidates)
	return fmt.Sprintf(" (did you mean %s?)", best)
}

// reportUnknownFlag follows the flag package's "flag provided but not defined" with the nearest
// flag fs defines.
func reportUnknownFlag(fs *flag.FlagSet, err error, w io.Writer) {
	name, ok := strings.CutPrefix(err.Error(), "flag provided but not defined: -")
	if !ok {
		return
	}
	var names []string
	fs.VisitAll(func(fl *flag.Flag) { names = append(names, fl.Name) })
	best, _ := nearest(strings.TrimLeft(name, "-"), names)
	fmt.Fprintf(w, "joiner controller: unknown flag --%s; did you mean --%s?\n", strings.TrimLeft(name, "-"), best)
}

// printSettings writes one tab-separated line per setting and per feature gate: kind ("setting"
// or "gate"), flag or gate name, environment variable, value, where the value came from, and what
// it does in Joiner.
func printSettings(w io.Writer, f *controllerFlags) {
	fmt.Fprintln(w, "# kind\tflag\tenvironment variable\tvalue\tfrom\teffect in Joiner")
	for i := range settingsTable {
		row := &settingsTable[i]
		g := f.karp.given[row.flag]
		fmt.Fprintf(w, "setting\t--%s\t%s\t%s\t%s\t%s\n", row.flag, row.env, g.text, sourceName(row, g), describe(row.effect, row.target, row.note))
	}
	for _, g := range featureGates {
		fmt.Fprintf(w, "gate\t%s\tFEATURE_GATES\t%t\t%s\t%s\n", g.name, f.karp.gates[g.name], gateSource(f, g.name), describe(g.effect, g.target, g.note))
	}
}

// describe is what a setting or gate does in Joiner.
func describe(e effect, target, note string) string {
	if e == supported {
		return "supported: " + target
	}
	return e.String() + ": " + note
}
