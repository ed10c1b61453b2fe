package webhooks

import (
	"net/http"
	"strings"
	"unicode/utf8"

	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// findings are the results of semantic checks: denials reject the request, one line each; warnings admit
// it and are shown by kubectl.
type findings struct {
	denials  []string
	warnings []string
}

func (f *findings) deny(msg string) { f.denials = append(f.denials, msg) }
func (f *findings) warn(msg string) { f.warnings = append(f.warnings, msg) }

func (f *findings) add(other findings) {
	f.denials = append(f.denials, other.denials...)
	f.warnings = append(f.warnings, other.warnings...)
}

// grandfather turns the denials of an update that the old object already had into warnings, so an
// unrelated change to an object that predates a check (or the removal of its finalizers) is not blocked.
func grandfather(updated, old findings) findings {
	if len(old.denials) == 0 {
		return updated
	}
	had := make(map[string]bool, len(old.denials))
	for _, d := range old.denials {
		had[d] = true
	}
	out := findings{warnings: updated.warnings}
	for _, d := range updated.denials {
		if had[d] {
			out.warn("pre-existing: " + d)
			continue
		}
		out.deny(d)
	}
	return out
}

// respond builds the final response: a denial listing every line when there are denials, otherwise an
// admission. Warnings ride along either way, whole: a warning is never cut (the API server keeps
// warnings whole unless a response's warnings add up to more than 4 KiB).
func respond(f findings) admission.Response {
	warnings := clampWarnings(f.warnings)
	if len(f.denials) > 0 {
		return admission.Denied(strings.Join(f.denials, "\n")).WithWarnings(warnings...)
	}
	return admission.Allowed("").WithWarnings(warnings...)
}

// badRequest answers a request the handler cannot read (wrong kind, undecodable object). It rejects: such
// a request cannot be checked, and the API server's own schema validation would reject it as well.
func badRequest(err error) admission.Response {
	return admission.Errored(http.StatusBadRequest, err)
}

// clampWarnings makes warnings safe to return: control characters become spaces (the API server drops
// warnings that cannot go into an HTTP header), and duplicates go. Warnings are never cut.
func clampWarnings(warnings []string) []string {
	if len(warnings) == 0 {
		return nil
	}
	out := make([]string, 0, len(warnings))
	seen := make(map[string]bool, len(warnings))
	for _, w := range warnings {
		w = sanitizeWarning(w)
		if w == "" || seen[w] {
			continue
		}
		seen[w] = true
		out = append(out, w)
	}
	return out
}

func sanitizeWarning(w string) string {
	if !utf8.ValidString(w) {
		w = strings.ToValidUTF8(w, "?")
	}
	return strings.TrimSpace(strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f {
			return ' '
		}
		return r
	}, w))
}
