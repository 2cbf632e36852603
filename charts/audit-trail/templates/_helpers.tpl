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

{{/*
  The one image of every pod, the migrate Job and the helm test pod. global.imageRegistry (an umbrella
  chart's mirror) replaces the registry of image.repository, or is put before a repository that names none
  (the first path segment is a registry when it has a dot or a port, or is localhost, as Docker decides).
*/}}
{{- define "audit-trail.image" -}}
{{- $repository := .Values.image.repository }}
{{- with (.Values.global | default dict).imageRegistry }}
{{- $segments := splitList "/" $repository }}
{{- $first := first $segments }}
{{- if and (gt (len $segments) 1) (or (contains "." $first) (contains ":" $first) (eq $first "localhost")) }}
{{- $repository = rest $segments | join "/" }}
{{- end }}
{{- $repository = printf "%s/%s" (trimSuffix "/" .) $repository }}
{{- end }}
{{- if .Values.image.digest }}
{{- $repository }}@{{ .Values.image.digest }}
{{- else }}
{{- $repository }}:{{ .Values.image.tag | default .Chart.AppVersion }}
{{- end }}
{{- end }}

{{/*
  imagePullSecrets of every pod: the chart's own and an umbrella chart's global.imagePullSecrets (names or
  {name: ...}, as charts write them), each once. Empty when there are none.
*/}}
{{- define "audit-trail.imagePullSecrets" -}}
{{- $names := list }}
{{- range concat ((.Values.global | default dict).imagePullSecrets | default list) .Values.imagePullSecrets }}
{{- if kindIs "string" . }}
{{- $names = append $names . }}
{{- else }}
{{- $names = append $names .name }}
{{- end }}
{{- end }}
{{- range $name := $names | uniq }}
- name: {{ $name }}
{{- end }}
{{- end }}

{{/* A Service name of at most 63 characters: include "audit-trail.serviceName" (dict "root" $ "suffix" "api-internal") */}}
{{- define "audit-trail.serviceName" -}}
{{- $prefix := include "audit-trail.fullname" .root | trunc (int (sub 62 (len .suffix))) | trimSuffix "-" }}
{{- printf "%s-%s" $prefix .suffix }}
{{- end }}

{{/*
  The keys of the Secret every pod reads (secretKeyRef, not optional). The sealer's pods also read
  SEAL_SIGNING_KEY: see audit-trail.requiredSecretKeys. docs/operations.md lists the same keys.
*/}}
{{- define "audit-trail.podSecretKeys" -}}
{{- list "DATABASE_URL" "REDIS_URL" "NATS_URL" "KEY_PEPPER" "SECRET_ENCRYPTION_KEY" "INGEST_TOKENS" | toYaml }}
{{- end }}

{{/* Every key the Secret must hold for the enabled roles. */}}
{{- define "audit-trail.requiredSecretKeys" -}}
{{- $keys := include "audit-trail.podSecretKeys" . | fromYamlArray }}
{{- if .Values.sealer.enabled }}
{{- $keys = append $keys "SEAL_SIGNING_KEY" }}
{{- end }}
{{- $keys | toYaml }}
{{- end }}

{{- define "audit-trail.secretName" -}}
{{- .Values.secrets.existingSecret | default (printf "%s-env" (include "audit-trail.fullname" .)) }}
{{- end }}

{{/*
  A name for what is not in the release's namespace (cluster-scoped RBAC, Roles in watched namespaces): the
  release namespace comes first, since the same release name may be installed in two namespaces, and a dot
  after it, which no namespace name has (a DNS label): "x" and "team-audit-trail" cannot make the name of
  "x-team" and "audit-trail".
  include "audit-trail.sharedName" (dict "root" $ "suffix" "controller")
*/}}
{{- define "audit-trail.sharedName" -}}
{{- printf "%s.%s-%s" .root.Release.Namespace (include "audit-trail.fullname" .root) .suffix }}
{{- end }}

{{/* The controller's leader-election Lease: one per release (CONTROLLER_LEASE_NAME), and the only one its Role names. */}}
{{- define "audit-trail.leaseName" -}}
{{- printf "%s-controller" (include "audit-trail.fullname" .) }}
{{- end }}

{{- define "audit-trail.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- .Values.serviceAccount.name | default (include "audit-trail.fullname" .) }}
{{- else }}
{{- if and .Values.rbac.create .Values.controller.enabled (or (not .Values.serviceAccount.name) (eq .Values.serviceAccount.name "default")) }}
{{- fail "serviceAccount.name: with serviceAccount.create=false, name an existing ServiceAccount other than \"default\": the controller's RBAC (Secrets in every watched namespace) is bound to it, and every pod of the namespace runs as \"default\"" }}
{{- end }}
{{- .Values.serviceAccount.name | default "default" }}
{{- end }}
{{- end }}

{{/* Where each dependency's certificate files are mounted, and the variables that name them. */}}
{{- define "audit-trail.tlsVariablePrefixes" -}}
postgres: DATABASE_SSL
redis: REDIS_TLS
nats: NATS_TLS
{{- end }}

{{/* Environment for the TLS files and NATS credentials of the dependencies a pod uses: (dict "root" $ "uses" (list "postgres" ...)) */}}
{{- define "audit-trail.dependencyEnv" -}}
{{- $prefixes := include "audit-trail.tlsVariablePrefixes" . | fromYaml }}
{{- range $dependency := .uses }}
{{- $tls := index $.root.Values.dependencyTls $dependency }}
{{- if $tls.secretName }}
- name: {{ index $prefixes $dependency }}_CA
  value: /etc/audit-trail/tls/{{ $dependency }}/ca.crt
{{- if $tls.clientCertificate }}
- name: {{ index $prefixes $dependency }}_CERT
  value: /etc/audit-trail/tls/{{ $dependency }}/tls.crt
- name: {{ index $prefixes $dependency }}_KEY
  value: /etc/audit-trail/tls/{{ $dependency }}/tls.key
{{- end }}
{{- end }}
{{- end }}
{{- if and (has "nats" .uses) .root.Values.natsCredentials.secretName }}
- name: NATS_CREDS
  value: /etc/audit-trail/nats/{{ .root.Values.natsCredentials.key }}
{{- end }}
{{- end }}

{{/* Volumes for the same, plus extraVolumes and the scratch directory: (dict "root" $ "uses" (list ...) "tmpSize" "64Mi") */}}
{{- define "audit-trail.volumes" -}}
# The root filesystem is read-only; Node and libraries may still want a scratch directory.
- name: tmp
  emptyDir: {sizeLimit: {{ .tmpSize }}}
{{- range $dependency := .uses }}
{{- $tls := index $.root.Values.dependencyTls $dependency }}
{{- if $tls.secretName }}
- name: tls-{{ $dependency }}
  secret:
    secretName: {{ $tls.secretName }}
    defaultMode: 288 # 0440: readable by the pod's group (fsGroup) only
    items:
      - {key: ca.crt, path: ca.crt}
      {{- if $tls.clientCertificate }}
      - {key: tls.crt, path: tls.crt}
      - {key: tls.key, path: tls.key}
      {{- end }}
{{- end }}
{{- end }}
{{- if and (has "nats" .uses) .root.Values.natsCredentials.secretName }}
- name: nats-credentials
  secret:
    secretName: {{ .root.Values.natsCredentials.secretName }}
    defaultMode: 288 # 0440
    items:
      - {key: {{ .root.Values.natsCredentials.key }}, path: {{ .root.Values.natsCredentials.key }}}
{{- end }}
{{- with .root.Values.extraVolumes }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{- define "audit-trail.volumeMounts" -}}
- {name: tmp, mountPath: /tmp}
{{- range $dependency := .uses }}
{{- if (index $.root.Values.dependencyTls $dependency).secretName }}
- {name: tls-{{ $dependency }}, mountPath: /etc/audit-trail/tls/{{ $dependency }}, readOnly: true}
{{- end }}
{{- end }}
{{- if and (has "nats" .uses) .root.Values.natsCredentials.secretName }}
- {name: nats-credentials, mountPath: /etc/audit-trail/nats, readOnly: true}
{{- end }}
{{- with .root.Values.extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
  PUBLIC_BASE_URL: config.publicBaseUrl, else the Ingress's first host (https when the Ingress has TLS).
*/}}
{{- define "audit-trail.publicBaseUrl" -}}
{{- if .Values.config.publicBaseUrl -}}
{{ .Values.config.publicBaseUrl }}
{{- else if and .Values.ingress.enabled .Values.ingress.hosts -}}
{{ ternary "https" "http" (gt (len .Values.ingress.tls) 0) }}://{{ (first .Values.ingress.hosts).host }}
{{- end -}}
{{- end -}}

{{/*
  The container environment: configuration inline, connection strings and secrets from the Secret, the
  certificate files of the dependencies the pod uses, then extraEnv (last, so it can override any of them).
  (dict "root" $ "uses" (list "postgres" ...))
*/}}
{{- define "audit-trail.env" -}}
- name: KEY_ENVIRONMENT
  value: {{ .root.Values.config.keyEnvironment | quote }}
- name: LOG_LEVEL
  value: {{ .root.Values.config.logLevel | quote }}
- name: NATS_NAMESPACE
  value: {{ .root.Values.config.natsNamespace | quote }}
- name: NATS_STREAM_REPLICAS
  value: {{ .root.Values.config.natsStreamReplicas | quote }}
- name: DATABASE_POOL_SIZE
  value: {{ .root.Values.config.databasePoolSize | quote }}
- name: TRUSTED_PROXIES
  value: {{ join "," .root.Values.config.trustedProxies | quote }}
{{- with include "audit-trail.publicBaseUrl" .root }}
- name: PUBLIC_BASE_URL
  value: {{ . | quote }}
{{- end }}
- name: PORTAL_FRAME_ANCESTORS
  value: {{ join "," .root.Values.config.portalFrameAncestors | quote }}
- name: WEBHOOK_ALLOW_HTTP
  value: {{ .root.Values.config.webhookAllowHttp | quote }}
- name: WEBHOOK_ALLOW_PRIVATE_TARGETS
  value: {{ .root.Values.config.webhookAllowPrivateTargets | quote }}
- name: DELIVERY_SCHEDULE
  value: {{ .root.Values.config.deliverySchedule | quote }}
- name: SEAL_INTERVAL
  value: {{ .root.Values.config.sealInterval | quote }}
{{- with .root.Values.config.checkpointOrigin }}
- name: CHECKPOINT_ORIGIN
  value: {{ . | quote }}
{{- end }}
{{- with .root.Values.config.retentionDefault }}
- name: RETENTION_DEFAULT
  value: {{ . | quote }}
{{- end }}
- name: RETENTION_INTERVAL
  value: {{ .root.Values.retention.interval | quote }}
- name: RETENTION_BATCH_SIZE
  value: {{ .root.Values.retention.batchSize | quote }}
- name: RETENTION_DUTY_CYCLE
  value: {{ .root.Values.retention.dutyCycle | quote }}
- name: DELIVERY_ENDPOINT_CONCURRENCY
  value: {{ .root.Values.config.deliveryEndpointConcurrency | quote }}
- name: DELIVERY_MAX_SOCKETS
  value: {{ .root.Values.config.deliveryMaxSockets | quote }}
- name: RATE_LIMIT_READ_PER_MINUTE
  value: {{ .root.Values.config.rateLimits.readPerMinute | quote }}
- name: RATE_LIMIT_WRITE_PER_MINUTE
  value: {{ .root.Values.config.rateLimits.writePerMinute | quote }}
- name: SHUTDOWN_GRACE_MS
  value: {{ .root.Values.config.shutdownGraceMs | quote }}
- name: SHUTDOWN_DRAIN_DELAY_MS
  value: {{ .root.Values.config.shutdownDrainDelayMs | quote }}
- name: PORT
  value: {{ .root.Values.service.publicPort | quote }}
- name: INTERNAL_PORT
  value: {{ .root.Values.service.internalPort | quote }}
{{- range $name := include "audit-trail.podSecretKeys" $.root | fromYamlArray }}
- name: {{ $name }}
  valueFrom:
    secretKeyRef:
      name: {{ include "audit-trail.secretName" $.root }}
      key: {{ $name }}
{{- end }}
{{- with include "audit-trail.dependencyEnv" . | trim }}
{{ . }}
{{- end }}
{{- with .root.Values.config.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/*
  The archive store (retention.archive): where the retention role archives before expiry and where
  integrityPublish copies tenants' logs. Keys from the Secret when it holds them (the chart never generates
  them); otherwise the AWS SDK's own chain (IRSA, instance role).
*/}}
{{- define "audit-trail.archiveEnv" -}}
- name: ARCHIVE_S3_REGION
  value: {{ .Values.retention.archive.region | quote }}
{{- with .Values.retention.archive.endpoint }}
- name: ARCHIVE_S3_ENDPOINT
  value: {{ . | quote }}
{{- end }}
- name: ARCHIVE_S3_FORCE_PATH_STYLE
  value: {{ .Values.retention.archive.forcePathStyle | quote }}
{{- range $key := list "ARCHIVE_S3_ACCESS_KEY_ID" "ARCHIVE_S3_SECRET_ACCESS_KEY" }}
- name: {{ $key }}
  valueFrom:
    secretKeyRef:
      name: {{ include "audit-trail.secretName" $ }}
      key: {{ $key }}
      optional: true
{{- end }}
{{- end -}}

{{/*
  What each role's Deployment runs: CLI roles, whether it serves the public port, the dependencies it connects
  to, and what else it reaches (networkPolicy.egress).
*/}}
{{- define "audit-trail.roles" -}}
api: {cliRoles: api, public: true, uses: [postgres, redis], reaches: [webhooks]}
ingest: {cliRoles: ingest, public: false, uses: [postgres, nats], reaches: []}
worker: {cliRoles: "relay,worker", public: false, uses: [postgres, nats, redis], reaches: [webhooks]}
controller: {cliRoles: controller, public: false, uses: [postgres], reaches: [kubernetesApi]}
sealer: {cliRoles: sealer, public: false, uses: [postgres, nats], reaches: []}
streams: {cliRoles: streams, public: false, uses: [postgres], reaches: [webhooks]}
retention: {cliRoles: retention, public: false, uses: [postgres], reaches: [archive]}
{{- end }}

{{/*
  Consistency the JSON schema cannot express (it never compares two values): a PodDisruptionBudget that no
  eviction can satisfy blocks every node drain, and an autoscaler whose minimum exceeds its maximum never
  settles. (dict "root" $ "role" "api")
*/}}
{{- define "audit-trail.checkScaling" -}}
{{- $values := index .root.Values .role }}
{{- $autoscaled := and (hasKey $values "autoscaling") $values.autoscaling.enabled }}
{{- if $autoscaled }}
{{- if gt (int $values.autoscaling.minReplicas) (int $values.autoscaling.maxReplicas) }}
{{- fail (printf "%s.autoscaling.minReplicas (%d) must not exceed %s.autoscaling.maxReplicas (%d)" .role (int $values.autoscaling.minReplicas) .role (int $values.autoscaling.maxReplicas)) }}
{{- end }}
{{- end }}
{{- if $values.podDisruptionBudget.enabled }}
{{- $replicas := int $values.replicas }}
{{- $replicasFrom := printf "%s.replicas" .role }}
{{- if $autoscaled }}
{{- $replicas = int $values.autoscaling.minReplicas }}
{{- $replicasFrom = printf "%s.autoscaling.minReplicas" .role }}
{{- end }}
{{- $minAvailable := $values.podDisruptionBudget.minAvailable | toString }}
{{- if hasSuffix "%" $minAvailable }}
{{- if ge (int (trimSuffix "%" $minAvailable)) 100 }}
{{- fail (printf "%s.podDisruptionBudget.minAvailable (%s) lets no pod be evicted, so node drains would never finish; lower it or set %s.podDisruptionBudget.enabled=false" .role $minAvailable .role) }}
{{- end }}
{{- else if and (gt $replicas 0) (ge (int $minAvailable) $replicas) }}
{{- fail (printf "%s.podDisruptionBudget.minAvailable (%s) must be below %s (%d), or no pod can be evicted and node drains never finish; lower it or set %s.podDisruptionBudget.enabled=false" .role $minAvailable $replicasFrom $replicas .role) }}
{{- end }}
{{- end }}
{{- end }}
