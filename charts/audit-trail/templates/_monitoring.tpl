{{/*
The series selector of the release's alerting rules: the labels the Prometheus Operator gives what the
ServiceMonitor scrapes (job is the headless metrics Service, namespace the release's), unless
prometheusRule.selector names others (a scrape configured some other way).
*/}}
{{- define "audit-trail.metricsSelector" -}}
{{- .Values.prometheusRule.selector | default (printf "job=%q,namespace=%q" (printf "%s-metrics" (include "audit-trail.fullname" .)) .Release.Namespace) }}
{{- end }}

{{/* config.sealInterval (10s, 500ms, 1.5m, 1h) in seconds. */}}
{{- define "audit-trail.sealIntervalSeconds" -}}
{{- $interval := .Values.config.sealInterval | toString }}
{{- $number := regexFind "^[0-9.]+" $interval | float64 }}
{{- $unit := trimPrefix (regexFind "^[0-9.]+" $interval) $interval }}
{{- $perUnit := dict "ms" 0.001 "s" 1.0 "m" 60.0 "h" 3600.0 }}
{{- mulf $number (get $perUnit $unit) }}
{{- end }}
