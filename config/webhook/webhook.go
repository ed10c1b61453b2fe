// Package webhook embeds Joiner's admission webhook configurations (mutating.yaml and
// validating.yaml), so a program that replays admission offline (joiner check) calls the same
// handlers, under the same webhook names and rules, as a cluster that installed them. It holds no
// logic.
package webhook

import "embed"

// Manifests holds mutating.yaml and validating.yaml.
//
//go:embed mutating.yaml validating.yaml
var Manifests embed.FS
