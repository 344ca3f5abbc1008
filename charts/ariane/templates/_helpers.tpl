{{/* Full name of the release's objects, at most 63 characters. */}}
{{- define "ariane.fullname" -}}
{{- if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "ariane.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end -}}

{{- define "ariane.labels" -}}
{{ include "ariane.selectorLabels" . }}
app.kubernetes.io/part-of: ariane
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{/*
The `helm test` smoke pod's labels: the release's, with its own component. Never the operator's
selector labels: a bare pod matching the operator Deployment's selector is adopted by its
ReplicaSet, which then deletes one of its two pods (the smoke pod, the newer) mid-test.
*/}}
{{- define "ariane.smokeLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: smoke-test
app.kubernetes.io/part-of: ariane
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "ariane.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "ariane.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "ariane.image" -}}
{{ .Values.image.repository }}:{{ default .Chart.AppVersion .Values.image.tag }}
{{- end -}}

{{- define "ariane.containerSecurityContext" -}}
runAsNonRoot: true
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
capabilities:
  drop: [ALL]
{{- end -}}

{{- define "ariane.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 10001
runAsGroup: 10001
seccompProfile:
  type: RuntimeDefault
{{- end -}}

{{/* The operator's rules on namespaced objects (a Role per watched namespace, or cluster-wide). */}}
{{- define "ariane.namespacedRules" -}}
- apiGroups: [ariane.dev]
  resources: [brokers, topics, consumergroups, rocketmqusers]
  verbs: [get, list, watch, patch]
- apiGroups: [ariane.dev]
  resources: [brokers/status, topics/status, consumergroups/status, rocketmqusers/status]
  verbs: [patch]
- apiGroups: [""]
  resources: [events]
  verbs: [create]
- apiGroups: [""]
  resources: [secrets]  # by derived name or secretRef only: no list, no watch, no delete
  verbs: [get, create, patch]
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, create, patch]
- apiGroups: [""]
  resources: [services]
  verbs: [create, patch, delete]
- apiGroups: [apps]
  resources: [deployments]
  verbs: [create, patch]
- apiGroups: [apps]
  resources: [statefulsets]
  verbs: [list, create, patch, delete]
- apiGroups: [""]
  resources: [pods]
  verbs: [list, delete]
- apiGroups: [""]
  resources: [persistentvolumeclaims]
  verbs: [list, patch]
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [create, patch, delete]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [list, create, patch, delete]
- apiGroups: [cert-manager.io]
  resources: [certificates]  # Broker.spec.tls.issuerRef: the operator asks cert-manager
  verbs: [create, patch]
- apiGroups: [monitoring.coreos.com]
  resources: [servicemonitors, prometheusrules]
  verbs: [create, patch]
{{- end -}}
