{{/* Chart name, overridable. */}}
{{- define "orca.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
Fully qualified name: release-chart, unless the release name already
contains the chart name. Truncated to 63 characters (DNS label limit).
*/}}
{{- define "orca.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{/* name-version for the helm.sh/chart label. */}}
{{- define "orca.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Standard labels; pass (dict "ctx" $ "component" "operator"). */}}
{{- define "orca.labels" -}}
helm.sh/chart: {{ include "orca.chart" .ctx }}
{{ include "orca.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: orca
{{- end }}

{{/* Selector labels (stable across upgrades); pass (dict "ctx" $ "component" "operator"). */}}
{{- define "orca.selectorLabels" -}}
app.kubernetes.io/name: {{ include "orca.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end }}

{{/* Name of a component's objects: fullname-component, within 63 characters. */}}
{{- define "orca.componentName" -}}
{{- printf "%s-%s" (include "orca.fullname" .ctx | trunc (int (sub 62 (len .component)))) .component | trimSuffix "-" }}
{{- end }}

{{/* The operator's ServiceAccount. */}}
{{- define "orca.operatorServiceAccountName" -}}
{{- if .Values.operator.serviceAccount.create }}
{{- default (include "orca.componentName" (dict "ctx" . "component" "operator")) .Values.operator.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.operator.serviceAccount.name }}
{{- end }}
{{- end }}

{{/* repository:tag, the tag defaulting to the chart's appVersion; pass (dict "ctx" $ "image" .Values.x.image). */}}
{{- define "orca.image" -}}
{{- printf "%s:%s" .image.repository (default .ctx.Chart.AppVersion .image.tag) }}
{{- end }}

{{/* Restricted pod and container security contexts (the image's user is 65532). */}}
{{- define "orca.podSecurityContext" -}}
runAsNonRoot: true
runAsUser: 65532
runAsGroup: 65532
fsGroup: 65532
seccompProfile:
  type: RuntimeDefault
{{- end }}

{{- define "orca.containerSecurityContext" -}}
allowPrivilegeEscalation: false
readOnlyRootFilesystem: true
runAsNonRoot: true
capabilities:
  drop: [ALL]
{{- end }}

{{/*
What the operator does with each kind, and nothing more: read OrcaDeployments
and write their status; apply, list (to prune) and delete the workloads it
renders; post Events. No Secrets: pods mount the API-key Secret themselves.
*/}}
{{- define "orca.operatorRules" -}}
- apiGroups: [serving.orca.dev]
  resources: [orcadeployments]
  verbs: [get, list, watch]
- apiGroups: [serving.orca.dev]
  resources: [orcadeployments/status]
  verbs: [get, update, patch]
# ownerReferences with blockOwnerDeletion need update on the owner's finalizers.
- apiGroups: [serving.orca.dev]
  resources: [orcadeployments/finalizers]
  verbs: [update]
- apiGroups: [apps]
  resources: [statefulsets, deployments]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [""]
  resources: [services, configmaps]
  verbs: [get, list, watch, create, patch, delete]
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
{{- if .Values.operator.manageServiceMonitors }}
- apiGroups: [monitoring.coreos.com]
  resources: [servicemonitors]
  verbs: [get, list, watch, create, patch, delete]
{{- end }}
{{- end }}

{{/* ---- standalone mode (one engine replica rendered from values) ---- */}}

{{/* StatefulSet names must stay within 52 characters (pod hash labels). */}}
{{- define "orca.standalone.pipelineName" -}}
{{- printf "%s-pipeline" (include "orca.fullname" . | trunc 43 | trimSuffix "-") }}
{{- end }}

{{- define "orca.standalone.schedulerAddress" -}}
{{- printf "%s.%s.svc.%s:7000" (include "orca.componentName" (dict "ctx" . "component" "scheduler")) .Release.Namespace .Values.operator.clusterDomain }}
{{- end }}

{{/* Comma-separated gRPC addresses of the stages, in stage order. */}}
{{- define "orca.standalone.stageAddresses" -}}
{{- $sts := include "orca.standalone.pipelineName" . }}
{{- $addrs := list }}
{{- range $i := until (int .Values.standalone.pipeline) }}
{{- $addrs = append $addrs (printf "%s-%d.%s.%s.svc.%s:7100" $sts $i $sts $.Release.Namespace $.Values.operator.clusterDomain) }}
{{- end }}
{{- join "," $addrs }}
{{- end }}

{{/* Model volume, when the model comes from a PVC or is synthesized. */}}
{{- define "orca.standalone.modelVolume" -}}
{{- if .Values.standalone.model.pvc -}}
- name: model
  persistentVolumeClaim:
    claimName: {{ .Values.standalone.model.pvc }}
    readOnly: true
{{- else if .Values.standalone.model.synthetic.enabled -}}
- name: model
  emptyDir: {}
{{- end }}
{{- end }}

{{- define "orca.standalone.modelMount" -}}
{{- if or .Values.standalone.model.pvc .Values.standalone.model.synthetic.enabled -}}
- name: model
  mountPath: /models
  readOnly: {{ not (empty .Values.standalone.model.pvc) }}
{{- end }}
{{- end }}

{{/* The init container that synthesizes the demo checkpoint. */}}
{{- define "orca.standalone.synthInit" -}}
{{- if and .Values.standalone.model.synthetic.enabled (not .Values.standalone.model.pvc) -}}
initContainers:
  - name: synthesize-model
    image: {{ include "orca.image" (dict "ctx" . "image" .Values.standalone.image) }}
    imagePullPolicy: {{ .Values.standalone.image.pullPolicy }}
    command: [orca]
    args:
      - model
      - synth
      - --out
      - {{ .Values.standalone.model.path | quote }}
      {{- range .Values.standalone.model.synthetic.args }}
      - {{ . | quote }}
      {{- end }}
    securityContext:
      {{- include "orca.containerSecurityContext" . | nindent 6 }}
    volumeMounts:
      - name: model
        mountPath: /models
{{- end }}
{{- end }}

{{/* Pod-level settings shared by the standalone workloads. */}}
{{- define "orca.standalone.podCommon" -}}
automountServiceAccountToken: false
enableServiceLinks: false
securityContext:
  {{- include "orca.podSecurityContext" . | nindent 2 }}
{{- end }}

{{/* Probes on the container's `http` port. */}}
{{- define "orca.standalone.probes" -}}
readinessProbe:
  httpGet:
    path: /ready
    port: http
  periodSeconds: 5
livenessProbe:
  httpGet:
    path: /health
    port: http
  periodSeconds: 10
{{- end }}

{{/* "true" when the pods need the model volume, "" otherwise. */}}
{{- define "orca.standalone.hasModelVolume" -}}
{{- if or .Values.standalone.model.pvc .Values.standalone.model.synthetic.enabled }}true{{ end }}
{{- end }}

{{/* "true" when an init container synthesizes the model. */}}
{{- define "orca.standalone.synthesizes" -}}
{{- if and .Values.standalone.model.synthetic.enabled (not .Values.standalone.model.pvc) }}true{{ end }}
{{- end }}
