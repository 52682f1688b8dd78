{{/*
The chart's name (nameOverride replaces it).
*/}}
{{- define "clusterset-agent.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The name of the release's objects: the release name when it already holds the chart's name
(release clusterset-agent: clusterset-agent), else <release>-<name>; fullnameOverride
replaces it. At most 63 characters (a DNS label).
*/}}
{{- define "clusterset-agent.fullname" -}}
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
{{- define "clusterset-agent.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/*
The labels that select the pods (never change them on upgrade: a Deployment's selector is
immutable).
*/}}
{{- define "clusterset-agent.selectorLabels" -}}
app.kubernetes.io/name: {{ include "clusterset-agent.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end }}

{{/*
The standard labels of every object. `mcsctl version` finds the daemons by
app.kubernetes.io/part-of=clusterset and reads app.kubernetes.io/name and
app.kubernetes.io/version from their pods.
*/}}
{{- define "clusterset-agent.labels" -}}
helm.sh/chart: {{ include "clusterset-agent.chart" . }}
{{ include "clusterset-agent.selectorLabels" . }}
app.kubernetes.io/version: {{ .Values.image.tag | default .Chart.AppVersion | quote }}
app.kubernetes.io/component: agent
app.kubernetes.io/part-of: clusterset
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/*
The ServiceAccount the agent runs as.
*/}}
{{- define "clusterset-agent.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "clusterset-agent.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{/*
The image: repository:tag, the tag defaulting to the chart's appVersion.
*/}}
{{- define "clusterset-agent.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default .Chart.AppVersion) }}
{{- end }}
