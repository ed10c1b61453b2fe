// Package crd embeds the CustomResourceDefinitions that `make generate` writes into bases/, so a
// program that judges objects offline (joiner check) validates them against exactly the CRDs a
// cluster installs. It holds no logic and must never be edited by hand: bases/ is generated.
package crd

import "embed"

// Bases holds bases/*.yaml, one CustomResourceDefinition per file.
//
//go:embed bases/*.yaml
var Bases embed.FS
