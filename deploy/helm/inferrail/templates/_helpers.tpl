{{/* The chart's name. */}}
{{- define "inferrail.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's full name, the name of most objects. */}}
{{- define "inferrail.fullname" -}}
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

{{/* The headless Service of the vLLM pods (gateway mode). */}}
{{- define "inferrail.vllmService" -}}
{{- printf "%s-vllm" (include "inferrail.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The headless Service of the release's own pods, for index.warm_start_dns. */}}
{{- define "inferrail.peersService" -}}
{{- printf "%s-peers" (include "inferrail.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The admin port (/metrics, /admin/*) of the mode. */}}
{{- define "inferrail.adminPort" -}}
{{- ternary .Values.gateway.adminPort .Values.epp.metricsPort (eq .Values.mode "gateway") | int }}
{{- end }}

{{/* The InferencePool's name (epp mode). */}}
{{- define "inferrail.poolName" -}}
{{- default (include "inferrail.fullname" .) .Values.inferencePool.name }}
{{- end }}

{{- define "inferrail.serviceAccountName" -}}
{{- default (include "inferrail.fullname" .) .Values.serviceAccount.name }}
{{- end }}

{{/* Selects the pods of this release's gateway or EPP. */}}
{{- define "inferrail.selectorLabels" -}}
app.kubernetes.io/name: {{ include "inferrail.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: {{ .Values.mode }}
{{- end }}

{{/* Every object's labels but the component. */}}
{{- define "inferrail.commonLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "inferrail.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end }}

{{/* The labels of the gateway's or the EPP's objects: the component is the mode. */}}
{{- define "inferrail.labels" -}}
{{ include "inferrail.commonLabels" . }}
app.kubernetes.io/component: {{ .Values.mode }}
{{- end }}

{{- define "inferrail.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The GatewayClass of a created Gateway: the value, else the provider's. */}}
{{- define "inferrail.gatewayClassName" -}}
{{- $defaults := dict "istio" "istio" "kgateway" "kgateway" }}
{{- default (get $defaults .Values.provider.name) .Values.inferenceGateway.className }}
{{- end }}

{{/*
The values' problems, each a failed render with the value's path. Included by every
template, so that a bad value fails `helm template` and `helm install` alike.
*/}}
{{- define "inferrail.validate" -}}
{{- $v := .Values }}
{{- if not (has $v.mode (list "gateway" "epp")) }}
{{- fail (printf "mode: %q is neither gateway nor epp" $v.mode) }}
{{- end }}
{{- if not $v.models }}
{{- fail "models: at least one model is required" }}
{{- end }}
{{- range $i, $m := $v.models }}
{{- if not $m.name }}
{{- fail (printf "models[%d].name is required" $i) }}
{{- end }}
{{- end }}
{{- $labels := len $v.modelServers.matchLabels }}
{{- if or (lt $labels 1) (gt $labels 64) }}
{{- fail (printf "modelServers.matchLabels has %d entries; it needs 1 to 64" $labels) }}
{{- end }}
{{- $ports := len $v.modelServers.targetPorts }}
{{- if or (lt $ports 1) (gt $ports 8) }}
{{- fail (printf "modelServers.targetPorts has %d entries; it needs 1 to 8" $ports) }}
{{- end }}
{{- if ne (len (uniq $v.modelServers.targetPorts)) $ports }}
{{- fail "modelServers.targetPorts lists a port twice" }}
{{- end }}
{{- if not (has $v.modelServers.engineType (list "vllm" "sglang")) }}
{{- fail (printf "modelServers.engineType: %q is neither vllm nor sglang" $v.modelServers.engineType) }}
{{- end }}
{{- if eq $v.mode "epp" }}
{{- if not (has $v.epp.discovery (list "pool" "selector")) }}
{{- fail (printf "epp.discovery: %q is neither pool nor selector" $v.epp.discovery) }}
{{- end }}
{{- if not (has $v.provider.name (list "none" "istio" "kgateway" "envoy")) }}
{{- fail (printf "provider.name: %q is none of none, istio, kgateway, envoy" $v.provider.name) }}
{{- end }}
{{- if not (has $v.inferencePool.failureMode (list "FailOpen" "FailClose")) }}
{{- fail (printf "inferencePool.failureMode: %q is neither FailOpen nor FailClose" $v.inferencePool.failureMode) }}
{{- end }}
{{- if and $v.inferenceGateway.create (not (include "inferrail.gatewayClassName" .)) }}
{{- fail (printf "inferenceGateway.className is required with provider.name %s" $v.provider.name) }}
{{- end }}
{{- end }}
{{- end }}

{{/* Does this release render the InferencePool's consumers (the pool and its route)? */}}
{{- define "inferrail.usesPool" -}}
{{- if and (eq .Values.mode "epp") (eq .Values.epp.discovery "pool") }}true{{ end }}
{{- end }}

{{/*
Inferrail's config file. The values' `config` is laid under the keys the chart writes: the
models, the listen addresses and discovery, so that the ports, Services and probes agree.
*/}}
{{- define "inferrail.config" -}}
{{- $v := .Values }}
{{- $ms := $v.modelServers }}
{{- $names := list }}
{{- range $v.models }}
{{- $names = append $names .name }}
{{- end }}
{{- $gen := dict "models" $v.models }}
{{- if eq $v.mode "gateway" }}
{{- $_ := set $gen "server" (dict "listen" (printf "0.0.0.0:%d" (int $v.gateway.port)) "admin_listen" (printf "0.0.0.0:%d" (int $v.gateway.adminPort))) }}
{{- $host := printf "%s.%s.svc.%s" (include "inferrail.vllmService" .) .Release.Namespace $v.clusterDomain }}
{{- $groups := list }}
{{- range $i, $port := $ms.targetPorts }}
{{- $g := dict "name" (printf "%s-%d" (include "inferrail.fullname" $) (int $port)) "url" (printf "http://%s:%d" $host (int $port)) "models" $names "engine_type" $ms.engineType }}
{{- if $ms.kvEventsPort }}
{{- $_ := set $g "kv_events_port" (add (int $ms.kvEventsPort) $i) }}
{{- end }}
{{- $groups = append $groups (mustMergeOverwrite (deepCopy $v.gateway.dnsGroup) $g) }}
{{- end }}
{{- $_ := set $gen "discovery" (dict "dns" $groups) }}
{{- else }}
{{- $_ := set $gen "ext_proc" (dict "listen" (printf "0.0.0.0:%d" (int $v.epp.extProcPort)) "health_listen" (printf "0.0.0.0:%d" (int $v.epp.healthPort)) "admin_listen" (printf "0.0.0.0:%d" (int $v.epp.metricsPort))) }}
{{- $k := dict "models" $names "engine_type" $ms.engineType }}
{{- if $ms.kvEventsPort }}
{{- $_ := set $k "kv_events_port" (int $ms.kvEventsPort) }}
{{- end }}
{{- if eq $v.epp.discovery "pool" }}
{{- $_ := set $k "pool_name" (include "inferrail.poolName" .) }}
{{- $_ := set $k "pool_namespace" .Release.Namespace }}
{{- else }}
{{- $tps := list }}
{{- range $ms.targetPorts }}
{{- $tps = append $tps (int .) }}
{{- end }}
{{- $_ := set $k "pool_namespace" .Release.Namespace }}
{{- $_ := set $k "endpoint_selector" $ms.matchLabels }}
{{- $_ := set $k "target_ports" $tps }}
{{- end }}
{{- $_ := set $gen "discovery" (dict "kubernetes" $k) }}
{{- end }}
{{- if and (gt (int $v.replicaCount) 1) (not (hasKey (default (dict) $v.config.index) "warm_start_dns")) }}
{{- $peers := printf "http://%s.%s.svc.%s:%s" (include "inferrail.peersService" .) .Release.Namespace $v.clusterDomain (include "inferrail.adminPort" .) }}
{{- $_ := set $gen "index" (dict "warm_start_dns" $peers) }}
{{- end }}
{{- /* Several pods without KV events each see only their own placements: placing cold prompts
       on their rendezvous owner makes them agree (routing.cold_rendezvous), unless set. */}}
{{- if and (gt (int $v.replicaCount) 1) (not $ms.kvEventsPort) (not (hasKey (default (dict) $v.config.routing) "cold_rendezvous")) }}
{{- $_ := set $gen "routing" (dict "cold_rendezvous" true) }}
{{- end }}
{{- toYaml (mustMergeOverwrite (deepCopy $v.config) $gen) }}
{{- end }}
