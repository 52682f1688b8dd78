{{/*
The chart's name (nameOverride replaces it).
*/}}
{{- define "clusterset-gateway.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The name of the release's objects: the release name when it already holds the chart's name,
else <release>-<name>; fullnameOverride replaces it. At most 63 characters (a DNS label).
*/}}
{{- define "clusterset-gateway.fullname" -}}
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

{{/*
helm.sh/chart: <name>-<version> (a + in the version becomes _, as labels allow no +).
*/}}
{{- define "clusterset-gateway.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The labels that select the pods (never change them on upgrade: a DaemonSet's selector is
immutable).
*/}}
{{- define "clusterset-gateway.selectorLabels" -}}
app.kubernetes.io/name: {{ include "clusterset-gateway.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The standard labels of every object (`mcsctl version` reads part-of, name and version).
*/}}
{{- define "clusterset-gateway.labels" -}}
helm.sh/chart: {{ include "clusterset-gateway.chart" . }}
{{ include "clusterset-gateway.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/component: gateway
app.kubernetes.io/part-of: clusterset
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
The ServiceAccount the gateway runs as.
*/}}
{{- define "clusterset-gateway.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "clusterset-gateway.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The image: repository:tag, the tag defaulting to the chart's appVersion.
*/}}
{{- define "clusterset-gateway.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
