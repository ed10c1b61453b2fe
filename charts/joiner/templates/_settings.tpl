{{/*
Karpenter's settings (values under settings.*) and how they reach `joiner controller`: a setting the
binary takes as a flag today renders as that flag (joiner.settingsArgs); every other one renders as
the environment variable with Karpenter's name (joiner.settingsEnv). Unset values render nothing, so
the binary's defaults (Karpenter's) apply.
*/}}

{{/* The cloud provider: settings.cloudProvider, else aws, as Karpenter's chart (which always runs aws). */}}
{{- define "joiner.cloudProvider" -}}
{{- .Values.settings.cloudProvider | default "aws" -}}
{{- end }}

{{/* settings.clusterName, rendered with tpl as Karpenter's chart does. */}}
{{- define "joiner.clusterName" -}}
{{- tpl (.Values.settings.clusterName | default "" | toString) . -}}
{{- end }}

{{/* Karpenter's feature gates: values key and gate name, in Karpenter's FEATURE_GATES order. */}}
{{- define "joiner.featureGateNames" -}}
nodeRepair: NodeRepair
reservedCapacity: ReservedCapacity
spotToSpotConsolidation: SpotToSpotConsolidation
nodeOverlay: NodeOverlay
staticCapacity: StaticCapacity
capacityBuffer: CapacityBuffer
{{- end }}

{{/* FEATURE_GATES: Name=bool for each gate set in settings.featureGates (omitted gates keep their defaults). */}}
{{- define "joiner.featureGates" -}}
{{- $set := .Values.settings.featureGates | default dict -}}
{{- $out := list -}}
{{- range $key := list "nodeRepair" "reservedCapacity" "spotToSpotConsolidation" "nodeOverlay" "staticCapacity" "capacityBuffer" -}}
{{- $v := index $set $key -}}
{{- if kindIs "bool" $v -}}
{{- $out = append $out (printf "%s=%t" (index (fromYaml (include "joiner.featureGateNames" $)) $key) $v) -}}
{{- end -}}
{{- end -}}
{{- join "," $out -}}
{{- end }}

{{/* The settings the binary takes as flags (one `- --flag=value` line each). */}}
{{- define "joiner.settingsArgs" -}}
{{- $s := .Values.settings -}}
- --cloud-provider={{ include "joiner.cloudProvider" . }}
{{- with include "joiner.clusterName" . }}
- --cluster-name={{ . }}
{{- end }}
{{- if eq (include "joiner.cloudProvider" .) "aws" }}
{{- with $s.clusterEndpoint }}
- --cluster-endpoint={{ . }}
{{- end }}
{{- with $s.interruptionQueue }}
- --interruption-queue={{ . }}
{{- end }}
- --vm-memory-overhead-percent={{ $s.vmMemoryOverheadPercent }}
- --reserved-enis={{ $s.reservedENIs }}
{{- end }}
{{- $s2s := index ($s.featureGates | default dict) "spotToSpotConsolidation" }}
{{- if kindIs "bool" $s2s }}
- --spot-to-spot-consolidation={{ $s2s }}
{{- end }}
{{- end }}

{{/*
The other settings as Karpenter's environment variables (EnvVar list items; joiner controller reads each, see --print-settings), and the
log outputs. Strings render when not empty, booleans that default to false when true,
ignoreDRARequests (default true) whenever set.
*/}}
{{- define "joiner.settingsEnv" -}}
{{- $s := .Values.settings -}}
{{- $env := list -}}
{{- range $pair := list
  (list "CLUSTER_CA_BUNDLE" $s.clusterCABundle)
  (list "BATCH_MAX_DURATION" $s.batchMaxDuration)
  (list "BATCH_IDLE_DURATION" $s.batchIdleDuration)
  (list "PREFERENCE_POLICY" $s.preferencePolicy)
  (list "MIN_VALUES_POLICY" $s.minValuesPolicy)
  (list "ISOLATED_VPC" $s.isolatedVPC)
  (list "EKS_CONTROL_PLANE" $s.eksControlPlane)
  (list "ENABLE_ZONAL_SHIFT" $s.enableZonalShift)
  (list "DISABLE_DRY_RUN" $s.disableDryRun)
  (list "DISABLE_CLUSTER_STATE_OBSERVABILITY" $s.disableClusterStateObservability)
  (list "AMI_REFRESH_INTERVAL" $s.amiRefreshInterval)
  (list "SUBNET_REFRESH_INTERVAL" $s.subnetRefreshInterval)
  (list "LOG_OUTPUT_PATHS" (join "," ($.Values.logOutputPaths | default list)))
  (list "LOG_ERROR_OUTPUT_PATHS" (join "," ($.Values.logErrorOutputPaths | default list))) }}
{{- with index $pair 1 }}
{{- $env = append $env (dict "name" (index $pair 0) "value" (toString .)) }}
{{- end }}
{{- end }}
{{- if kindIs "bool" $s.ignoreDRARequests }}
{{- $env = append $env (dict "name" "IGNORE_DRA_REQUESTS" "value" (toString $s.ignoreDRARequests)) }}
{{- end }}
{{- with include "joiner.featureGates" . }}
{{- $env = append $env (dict "name" "FEATURE_GATES" "value" .) }}
{{- end }}
{{- with $env }}
{{- toYaml . }}
{{- end }}
{{- end }}
