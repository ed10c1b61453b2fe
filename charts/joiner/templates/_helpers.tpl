{{/*
Names are fixed conventions, not derived from the release name: the controller injects the caBundle
into webhook configurations by name, and the emergency step in NOTES.txt deletes them by name.
Install the chart once per cluster.
*/}}

{{- define "joiner.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: joiner
app.kubernetes.io/part-of: joiner
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.additionalLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
metadata.annotations of an object: extra (a dict, may be empty) over additionalAnnotations. Renders
nothing when both are empty. Arguments: a dict with root (.) and extra.
*/}}
{{- define "joiner.annotations" -}}
{{- $a := merge (dict) (.extra | default dict) (.root.Values.additionalAnnotations | default dict) -}}
{{- with $a -}}
annotations:
  {{- toYaml . | nindent 2 }}
{{- end -}}
{{- end }}

{{- define "joiner.selectorLabels" -}}
app.kubernetes.io/name: joiner
app.kubernetes.io/component: controller
{{- end }}

{{/* serviceAccount.name; empty means joiner, as Karpenter's chart falls back to its own name. */}}
{{- define "joiner.serviceAccountName" -}}
{{- .Values.serviceAccount.name | default "joiner" -}}
{{- end }}

{{/* The user name the webhooks exempt: Joiner's own ServiceAccount. */}}
{{- define "joiner.serviceAccountUser" -}}
system:serviceaccount:{{ .Release.Namespace }}:{{ include "joiner.serviceAccountName" . }}
{{- end }}

{{- define "joiner.image" -}}
{{- $img := .Values.controller.image -}}
{{- if $img.digest -}}
{{ $img.repository }}@{{ $img.digest }}
{{- else -}}
{{ $img.repository }}:{{ $img.tag | default .Chart.AppVersion }}
{{- end -}}
{{- end }}

{{/*
The affinity value, where a pod (anti-)affinity term without a labelSelector gets the controller's
selector labels, as in Karpenter's chart (a term without one would match no pod).
*/}}
{{- define "joiner.affinity" -}}
{{- with .Values.affinity -}}
{{- $aff := deepCopy . -}}
{{- $sel := dict "matchLabels" (fromYaml (include "joiner.selectorLabels" $)) -}}
{{- range $kind := list "podAffinity" "podAntiAffinity" -}}
{{- with index $aff $kind -}}
{{- range index . "requiredDuringSchedulingIgnoredDuringExecution" | default list -}}
{{- if not (hasKey . "labelSelector") -}}{{- $_ := set . "labelSelector" $sel -}}{{- end -}}
{{- end -}}
{{- range index . "preferredDuringSchedulingIgnoredDuringExecution" | default list -}}
{{- with .podAffinityTerm -}}
{{- if not (hasKey . "labelSelector") -}}{{- $_ := set . "labelSelector" $sel -}}{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- toYaml $aff -}}
{{- end -}}
{{- end }}

{{/* kind/name of the cert-manager issuer that signs the serving certificate. */}}
{{- define "joiner.certManagerIssuer" -}}
{{- if .Values.certManager.issuerRef.name -}}
{{ .Values.certManager.issuerRef.kind | default "Issuer" }}/{{ .Values.certManager.issuerRef.name }}
{{- else -}}
Issuer/joiner-ca
{{- end -}}
{{- end }}

{{/* cert-manager mode: cainjector fills the caBundle from the serving Certificate (with additionalAnnotations). */}}
{{- define "joiner.webhookAnnotations" -}}
{{- $extra := dict -}}
{{- if .Values.certManager.enabled -}}
{{- $_ := set $extra "cert-manager.io/inject-ca-from" (printf "%s/joiner-webhook-cert" .Release.Namespace) -}}
{{- end -}}
{{- include "joiner.annotations" (dict "root" . "extra" $extra) -}}
{{- end }}

{{/*
One defaulting or validation webhook for one of Joiner's own kinds.
Arguments: a dict with root (.), name, path, group, version, resource, reinvocation (mutating only).
*/}}
{{- define "joiner.kindWebhook" -}}
{{- $root := .root -}}
- name: {{ .name }}
  clientConfig:
    service:
      name: joiner-webhook
      namespace: {{ $root.Release.Namespace }}
      path: {{ .path }}
      port: 443
  rules:
    - apiGroups: [{{ .group | quote }}]
      apiVersions: [{{ .version | quote }}]
      resources: [{{ .resource | quote }}]
      operations: ["CREATE", "UPDATE"]
      scope: Cluster
  failurePolicy: {{ $root.Values.webhook.failurePolicy }}
  matchPolicy: Equivalent
  {{- if .mutating }}
  reinvocationPolicy: Never
  {{- end }}
  sideEffects: None
  timeoutSeconds: 5
  admissionReviewVersions: ["v1"]
  matchConditions:
    # Joiner's own writes (status, finalizers, hash annotations) must never wait on its own webhook.
    - name: exclude-joiner-serviceaccount
      expression: "request.userInfo.username != '{{ include "joiner.serviceAccountUser" $root }}'"
{{- end }}

{{/* The Pod tenancy webhook (fail-open, opted-in namespaces only). Arguments: root, path, mutating. */}}
{{- define "joiner.podTenancyWebhook" -}}
{{- $root := .root -}}
- name: pod.tenancy.joiner.dev
  clientConfig:
    service:
      name: joiner-webhook
      namespace: {{ $root.Release.Namespace }}
      path: {{ .path }}
      port: 443
  rules:
    - apiGroups: [""]
      apiVersions: ["v1"]
      resources: ["pods"]
      operations: ["CREATE"]
      scope: Namespaced
  namespaceSelector:
    matchExpressions:
      - key: kubernetes.io/metadata.name
        operator: NotIn
        values: ["kube-system", "kube-public", "kube-node-lease", {{ $root.Release.Namespace | quote }}]
      - key: joiner.dev/nodepools
        operator: Exists
  failurePolicy: Ignore
  matchPolicy: Equivalent
  {{- if .mutating }}
  reinvocationPolicy: Never
  {{- end }}
  sideEffects: None
  timeoutSeconds: 3
  admissionReviewVersions: ["v1"]
{{- end }}
