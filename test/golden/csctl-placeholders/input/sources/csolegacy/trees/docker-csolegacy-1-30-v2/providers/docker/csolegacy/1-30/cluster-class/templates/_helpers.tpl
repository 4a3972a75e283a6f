{{/* The prefix of every object: the ClusterClass is named after the release, <tag>. */}}
{{- define "csolegacy.prefix" -}}
{{ .Release.Name }}-{{ .Chart.Version }}
{{- end }}

{{- define "csolegacy.labels" -}}
app.kubernetes.io/part-of: {{ .Chart.Name | trunc 63 | trimSuffix "-" }}
cluster-stack/version: {{ .Chart.Version | quote }}
{{- end }}

{{/* A reference to one of this chart's templates: apiVersion, kind, name, namespace. */}}
{{- define "csolegacy.ref" -}}
apiVersion: {{ index . 1 }}
kind: {{ index . 2 }}
name: {{ include "csolegacy.prefix" (index . 0) }}-{{ index . 3 }}
namespace: {{ (index . 0).Release.Namespace }}
{{- end }}
