{{/*
Render-time checks that values.schema.json cannot express. Keys of Karpenter's older layouts are
accepted by the schema only so that this template can fail naming their v1 replacement; all the
problems found are reported together.
*/}}

{{/* Keys of older Karpenter layouts: path → what replaces it. Nested paths are checked by walking. */}}
{{- define "joiner.legacyKeys" -}}
clusterName: "clusterName was removed: set settings.clusterName"
clusterEndpoint: "clusterEndpoint was removed: set settings.clusterEndpoint"
aws.defaultInstanceProfile: "aws.defaultInstanceProfile was removed: set spec.role (or spec.instanceProfile) on each EC2NodeClass"
aws: "aws.* was removed: use settings.* (settings.clusterName, settings.clusterEndpoint, settings.isolatedVPC, settings.vmMemoryOverheadPercent, settings.interruptionQueue) and the EC2NodeClass (role, tags, kubelet.maxPods)"
controller.clusterName: "controller.clusterName was removed: set settings.clusterName"
controller.clusterEndpoint: "controller.clusterEndpoint was removed: set settings.clusterEndpoint"
settings.aws.clusterName: "settings.aws.clusterName was removed: set settings.clusterName"
settings.aws.clusterEndpoint: "settings.aws.clusterEndpoint was removed: set settings.clusterEndpoint"
settings.aws.clusterCABundle: "settings.aws.clusterCABundle was removed: set settings.clusterCABundle"
settings.aws.defaultInstanceProfile: "settings.aws.defaultInstanceProfile was removed: set spec.role (or spec.instanceProfile) on each EC2NodeClass"
settings.aws.interruptionQueueName: "settings.aws.interruptionQueueName was removed: set settings.interruptionQueue"
settings.aws.isolatedVPC: "settings.aws.isolatedVPC was removed: set settings.isolatedVPC"
settings.aws.vmMemoryOverheadPercent: "settings.aws.vmMemoryOverheadPercent was removed: set settings.vmMemoryOverheadPercent"
settings.aws.reservedENIs: "settings.aws.reservedENIs was removed: set settings.reservedENIs"
settings.aws.enablePodENI: "settings.aws.enablePodENI was removed: pod ENI resources need no setting in v1"
settings.aws.enableENILimitedPodDensity: "settings.aws.enableENILimitedPodDensity was removed: set spec.kubelet.maxPods on the EC2NodeClass"
settings.aws.nodeNameConvention: "settings.aws.nodeNameConvention was removed: node names follow the EC2 instance's hostname type"
settings.aws.tags: "settings.aws.tags was removed: set spec.tags on each EC2NodeClass"
settings.aws.assumeRoleARN: "settings.aws.assumeRoleARN was removed: give the ServiceAccount the role (serviceAccount.annotations eks.amazonaws.com/role-arn, or EKS Pod Identity)"
settings.aws: "settings.aws.* was removed: use settings.clusterName, settings.clusterEndpoint, settings.clusterCABundle, settings.interruptionQueue, settings.isolatedVPC, settings.vmMemoryOverheadPercent, settings.reservedENIs, and the EC2NodeClass for the rest"
settings.featureGates.drift: "settings.featureGates.drift was removed: drift is always on in v1; remove it"
settings.featureGates.driftEnabled: "settings.featureGates.driftEnabled was removed: drift is always on in v1; remove it"
logConfig: "logConfig was removed: set logLevel, logOutputPaths and logErrorOutputPaths"
logEncoding: "logEncoding was removed: logs are JSON; remove it"
metrics: "metrics.port was moved: set controller.metrics.port"
webhook.enabled: "webhook.enabled was removed: Karpenter v1's conversion webhook is gone and Joiner's admission webhooks are always on; remove it"
webhook.metrics: "webhook.metrics was removed: the webhooks' metrics are served on controller.metrics.port; remove it"
{{- end }}

{{/* Whether the dotted path is set (present and not null) in .values. Arguments: values, path. */}}
{{- define "joiner.hasPath" -}}
{{- $cur := .values -}}
{{- $found := true -}}
{{- range $part := splitList "." .path -}}
{{- if and $found (kindIs "map" $cur) (hasKey $cur $part) (not (kindIs "invalid" (index $cur $part))) -}}
{{- $cur = index $cur $part -}}
{{- else -}}
{{- $found = false -}}
{{- end -}}
{{- end -}}
{{- if $found }}true{{ end -}}
{{- end }}

{{/* Fails the render with every problem in the values. Included once, by deployment.yaml. */}}
{{- define "joiner.validate" -}}
{{- $problems := list -}}
{{- $legacy := fromYaml (include "joiner.legacyKeys" .) -}}
{{- $present := list -}}
{{- range $path := keys $legacy | sortAlpha -}}
{{- if include "joiner.hasPath" (dict "values" $.Values "path" $path) -}}
{{- $present = append $present $path -}}
{{- end -}}
{{- end -}}
{{- /* A specific message (aws.defaultInstanceProfile) replaces the generic one of its parent (aws). */ -}}
{{- range $path := $present -}}
{{- $covered := false -}}
{{- range $other := $present -}}
{{- if hasPrefix (printf "%s." $path) $other -}}
{{- $covered = true -}}
{{- end -}}
{{- end -}}
{{- if not $covered -}}
{{- $problems = append $problems (index $legacy $path) -}}
{{- end -}}
{{- end -}}
{{- range $key := list "nameOverride" "fullnameOverride" -}}
{{- if index $.Values $key -}}
{{- $problems = append $problems (printf "%s is not supported: Joiner's object names are fixed (the controller and the emergency step address them by name); remove it" $key) -}}
{{- end -}}
{{- end -}}
{{- if not (has .Values.webhook.failurePolicy (list "Fail" "Ignore")) -}}
{{- $problems = append $problems "webhook.failurePolicy must be Fail or Ignore" -}}
{{- end -}}
{{- $provider := include "joiner.cloudProvider" . -}}
{{- if and (eq $provider "aws") (not (include "joiner.clusterName" .)) -}}
{{- $problems = append $problems "settings.clusterName is required: the aws provider tags instances and launch templates with it (set settings.clusterName=<your EKS cluster>), or set settings.cloudProvider=local to run the kwok simulator instead" -}}
{{- end -}}
{{- with $problems -}}
{{- fail (printf "invalid values:\n  - %s" (join "\n  - " .)) -}}
{{- end -}}
{{- end }}
