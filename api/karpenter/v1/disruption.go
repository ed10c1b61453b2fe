package v1

// Joiner's annotations on NodeClaims while its disruption controller replaces or removes them.
// They are the orchestration queue's persistent state: after a restart, commands are resumed (or
// rolled back) from them, and other controllers (static NodePools) leave such NodeClaims alone.
const (
	// DisruptionCommandAnnotationKey on a candidate NodeClaim names the command disrupting it.
	DisruptionCommandAnnotationKey = "joiner.dev/disruption-command"
	// DisruptionStartedAnnotationKey on a candidate NodeClaim is when its command started
	// (RFC 3339).
	DisruptionStartedAnnotationKey = "joiner.dev/disruption-started"
	// DisruptionReplacementsAnnotationKey on a candidate NodeClaim is how many replacements its
	// command launches.
	DisruptionReplacementsAnnotationKey = "joiner.dev/disruption-replacements"
	// DisruptionReplacementForAnnotationKey on a replacement NodeClaim names the command that
	// launched it. It stays after the command completes: the churn guard reads it.
	DisruptionReplacementForAnnotationKey = "joiner.dev/disruption-replacement-for"
)
