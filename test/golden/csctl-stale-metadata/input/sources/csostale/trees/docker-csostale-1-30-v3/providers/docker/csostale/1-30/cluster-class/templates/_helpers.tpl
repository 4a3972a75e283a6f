{{/* The prefix of every object: the ClusterClass is named after the release, <tag>. */}}
{{- define "csostale.prefix" -}}
{{ .Release.Name }}-{{ .Chart.Version }}
{{- end }}

{{- define "csostale.labels" -}}
app.kubernetes.io/part-of: {{ .Chart.Name | trunc 63 | trimSuffix "-" }}
cluster-stack/version: {{ .Chart.Version | quote }}
{{- end }}

{{/* A reference to one of this chart's templates: apiVersion, kind, name, namespace. */}}
{{- define "csostale.ref" -}}
apiVersion: {{ index . 1 }}
kind: {{ index . 2 }}
name: {{ include "csostale.prefix" (index . 0) }}-{{ index . 3 }}
namespace: {{ (index . 0).Release.Namespace }}
{{- end }}
