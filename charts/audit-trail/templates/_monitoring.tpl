{{/*
The series selector of the release's alerting rules: the labels the Prometheus Operator gives what the
ServiceMonitor scrapes (job is the headless metrics Service, namespace the release's), unless
prometheusRule.selector names others (a scrape configured some other way).
*/}}
{{- define "audit-trail.metricsSelector" -}}
{{- .Values.prometheusRule.selector | default (printf "job=%q,namespace=%q" (printf "%s-metrics" (include "audit-trail.fullname" .)) .Release.Namespace) }}
{{- end }}

{{/* A duration of the values (10s, 500ms, 1.5m, 1h, 2d) in seconds: include "audit-trail.seconds" "1.5m" */}}
{{- define "audit-trail.seconds" -}}
{{- $duration := . | toString }}
{{- $number := regexFind "^[0-9.]+" $duration | float64 }}
{{- $unit := trimPrefix (regexFind "^[0-9.]+" $duration) $duration }}
{{- $perUnit := dict "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0 "d" 86400.0 }}
{{- mulf $number (get $perUnit $unit) }}
{{- end }}

{{/* config.sealInterval in seconds. */}}
{{- define "audit-trail.sealIntervalSeconds" -}}
{{- include "audit-trail.seconds" .Values.config.sealInterval }}
{{- end }}

{{/*
  How far back AuditTrailRetentionFailing looks for a failed pass: two retention intervals and an hour, at least
  three hours, so that a pass failing at every interval keeps it firing and one success after it lets it clear.
*/}}
{{- define "audit-trail.retentionAlertWindow" -}}
{{- $seconds := addf (mulf 2 (include "audit-trail.seconds" .Values.retention.interval | float64)) 3600 }}
{{- printf "%ds" (int (maxf $seconds 10800)) }}
{{- end }}
