{{/* Names and labels shared by every object of the release. */}}
{{- define "audit-trail.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "audit-trail.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains (include "audit-trail.name" .) .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name (include "audit-trail.name" .) | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "audit-trail.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
app.kubernetes.io/name: {{ include "audit-trail.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Selector labels of one role: include "audit-trail.selectorLabels" (dict "root" $ "role" "api") */}}
{{- define "audit-trail.selectorLabels" -}}
app.kubernetes.io/name: {{ include "audit-trail.name" .root }}
app.kubernetes.io/instance: {{ .root.Release.Name }}
app.kubernetes.io/component: {{ .role }}
{{- end }}

{{- define "audit-trail.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}

{{- define "audit-trail.secretName" -}}
{{- .Values.secrets.existingSecret | default (printf "%s-env" (include "audit-trail.fullname" .)) }}
{{- end }}

{{- define "audit-trail.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- .Values.serviceAccount.name | default (include "audit-trail.fullname" .) }}
{{- else }}
{{- .Values.serviceAccount.name | default "default" }}
{{- end }}
{{- end }}

{{/* The container environment: configuration inline, connection strings and secrets from the Secret. */}}
{{- define "audit-trail.env" -}}
- name: KEY_ENVIRONMENT
  value: {{ .Values.config.keyEnvironment | quote }}
- name: LOG_LEVEL
  value: {{ .Values.config.logLevel | quote }}
- name: NATS_NAMESPACE
  value: {{ .Values.config.natsNamespace | quote }}
- name: DATABASE_POOL_SIZE
  value: {{ .Values.config.databasePoolSize | quote }}
- name: TRUSTED_PROXIES
  value: {{ join "," .Values.config.trustedProxies | quote }}
- name: WEBHOOK_ALLOW_HTTP
  value: {{ .Values.config.webhookAllowHttp | quote }}
- name: WEBHOOK_ALLOW_PRIVATE_TARGETS
  value: {{ .Values.config.webhookAllowPrivateTargets | quote }}
- name: DELIVERY_SCHEDULE
  value: {{ .Values.config.deliverySchedule | quote }}
- name: DELIVERY_ENDPOINT_CONCURRENCY
  value: {{ .Values.config.deliveryEndpointConcurrency | quote }}
- name: RATE_LIMIT_READ_PER_MINUTE
  value: {{ .Values.config.rateLimits.readPerMinute | quote }}
- name: RATE_LIMIT_WRITE_PER_MINUTE
  value: {{ .Values.config.rateLimits.writePerMinute | quote }}
- name: SHUTDOWN_GRACE_MS
  value: {{ .Values.config.shutdownGraceMs | quote }}
- name: PORT
  value: {{ .Values.service.publicPort | quote }}
- name: INTERNAL_PORT
  value: {{ .Values.service.internalPort | quote }}
{{- range $name := list "DATABASE_URL" "REDIS_URL" "NATS_URL" "KEY_PEPPER" "SECRET_ENCRYPTION_KEY" "INGEST_TOKENS" }}
- name: {{ $name }}
  valueFrom:
    secretKeyRef:
      name: {{ include "audit-trail.secretName" $ }}
      key: {{ $name }}
{{- end }}
{{- with .Values.config.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* What each role's Deployment runs: CLI roles and whether it serves the public port. */}}
{{- define "audit-trail.roles" -}}
api: {cliRoles: api, public: true}
ingest: {cliRoles: ingest, public: false}
worker: {cliRoles: "relay,worker", public: false}
controller: {cliRoles: controller, public: false}
{{- end }}
