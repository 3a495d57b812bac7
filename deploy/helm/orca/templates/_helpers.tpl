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
Exactly the calls the operator makes, and nothing more (tests/unit/operator/
operator_rbac_test.cc runs the real operator against an API server that
answers 403 to anything else): read OrcaDeployments and write their status;
list (to observe and prune), server-side apply (patch, and create for new
objects) and delete what it renders; watch its workloads; post Events; create
each OrcaDeployment's internal-token Secret (NAME-internal-token, once). On
Secrets only `create`: the operator can read, change or delete none (it never
needs to: pods mount the Secrets themselves, and an existing token Secret is
left as it is). No pods: engine groups are replaced by deleting their
StatefulSets.
*/}}
{{- define "orca.operatorRules" -}}
- apiGroups: [serving.orca.dev]
  resources: [orcadeployments]
  verbs: [get, list, watch]
- apiGroups: [serving.orca.dev]
  resources: [orcadeployments/status]
  verbs: [update]
# Not called: admission (OwnerReferencesPermissionEnforcement) requires it for
# ownerReferences with blockOwnerDeletion on the children.
- apiGroups: [serving.orca.dev]
  resources: [orcadeployments/finalizers]
  verbs: [update]
- apiGroups: [apps]
  resources: [statefulsets, deployments]
  verbs: [list, watch, create, patch, delete]
- apiGroups: [""]
  resources: [services, configmaps]
  verbs: [list, create, patch, delete]
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [list, create, patch, delete]
- apiGroups: [networking.k8s.io]
  resources: [networkpolicies]
  verbs: [list, create, patch, delete]
- apiGroups: [""]
  resources: [secrets]
  verbs: [create]
- apiGroups: [""]
  resources: [events]
  verbs: [create]
{{- if .Values.operator.manageServiceMonitors }}
- apiGroups: [monitoring.coreos.com]
  resources: [servicemonitors]
  verbs: [list, create, patch, delete]
{{- end }}
{{- end }}

{{/* The OrcaDeployment's name (orcaDeployment.name, or the fullname). */}}
{{- define "orca.orcaDeploymentName" -}}
{{- default (include "orca.fullname" .) .Values.orcaDeployment.name }}
{{- end }}

{{/* The Secret generated for the schedulers' key (orcaDeployment.schedulerApiKey.generate). */}}
{{- define "orca.schedulerApiKeySecret" -}}
{{- printf "%s-scheduler-api-key" (include "orca.orcaDeploymentName" . | trunc 45 | trimSuffix "-") }}
{{- end }}

{{/* The key inside that Secret (the CRD's default of spec.scheduler.apiKeys.key). */}}
{{- define "orca.schedulerApiKeyKey" -}}
scheduler-api-keys
{{- end }}
