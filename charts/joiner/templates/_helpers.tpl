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
{{- end }}

{{- define "joiner.selectorLabels" -}}
app.kubernetes.io/name: joiner
app.kubernetes.io/component: controller
{{- end }}

{{- define "joiner.serviceAccountName" -}}
{{- required "serviceAccount.name must be set" .Values.serviceAccount.name -}}
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

{{/* kind/name of the cert-manager issuer that signs the serving certificate. */}}
{{- define "joiner.certManagerIssuer" -}}
{{- if .Values.certManager.issuerRef.name -}}
{{ .Values.certManager.issuerRef.kind | default "Issuer" }}/{{ .Values.certManager.issuerRef.name }}
{{- else -}}
Issuer/joiner-ca
{{- end -}}
{{- end }}

{{/* cert-manager mode: cainjector fills the caBundle from the serving Certificate. Empty otherwise. */}}
{{- define "joiner.webhookAnnotations" -}}
{{- if .Values.certManager.enabled -}}
annotations:
  cert-manager.io/inject-ca-from: {{ .Release.Namespace }}/joiner-webhook-cert
{{- end -}}
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
