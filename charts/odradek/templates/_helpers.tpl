{{/*
Name prefix of every object: the release name (or fullnameOverride), short enough that
"<prefix>-zookeeper-headless" and StatefulSet pod names stay within Kubernetes' limits.
*/}}
{{- define "odradek.fullname" -}}
{{- default .Release.Name .Values.fullnameOverride | trunc 30 | trimSuffix "-" -}}
{{- end -}}

{{- define "odradek.clusterName" -}}
{{- default .Release.Name .Values.clusterName -}}
{{- end -}}

{{- define "odradek.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels every object carries. */}}
{{- define "odradek.labels" -}}
helm.sh/chart: {{ include "odradek.chart" . }}
app.kubernetes.io/name: odradek
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: odradek
{{- with .Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels of one component: include "odradek.selectorLabels" (list . "broker") */}}
{{- define "odradek.selectorLabels" -}}
{{- $root := index . 0 -}}
app.kubernetes.io/name: odradek
app.kubernetes.io/instance: {{ $root.Release.Name }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "odradek.componentLabels" -}}
{{ include "odradek.labels" (index . 0) }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end -}}

{{- define "odradek.image" -}}
{{- printf "%s:%s" .Values.image.repository (toString .Values.image.tag) -}}
{{- end -}}

{{- define "odradek.broker.name" -}}{{ include "odradek.fullname" . }}-broker{{- end -}}
{{- define "odradek.broker.headless" -}}{{ include "odradek.fullname" . }}-broker-headless{{- end -}}
{{- define "odradek.bootstrap.name" -}}{{ include "odradek.fullname" . }}-bootstrap{{- end -}}
{{- define "odradek.zookeeper.name" -}}{{ include "odradek.fullname" . }}-zookeeper{{- end -}}
{{- define "odradek.zookeeper.headless" -}}{{ include "odradek.fullname" . }}-zookeeper-headless{{- end -}}
{{- define "odradek.operator.name" -}}{{ include "odradek.fullname" . }}-operator{{- end -}}

{{- define "odradek.operator.serviceAccountName" -}}
{{- if .Values.operator.serviceAccount.create -}}
{{- default (include "odradek.operator.name" .) .Values.operator.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.operator.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* host:port of the bootstrap Service, as clients inside the cluster reach it. */}}
{{- define "odradek.bootstrapServers" -}}
{{- printf "%s.%s.svc.%s:%d" (include "odradek.bootstrap.name" .) .Release.Namespace .Values.clusterDomain (int .Values.broker.port) -}}
{{- end -}}

{{/* zookeeper.connect of the brokers, chroot included. */}}
{{- define "odradek.zookeeperConnect" -}}
{{- $chroot := default (printf "/odradek/%s/%s" .Release.Namespace .Release.Name) .Values.zookeeper.chroot -}}
{{- if .Values.zookeeper.enabled -}}
{{- $hosts := list -}}
{{- range $i := until (int .Values.zookeeper.replicas) -}}
{{- $hosts = append $hosts (printf "%s-%d.%s.%s.svc.%s:2181" (include "odradek.zookeeper.name" $) $i (include "odradek.zookeeper.headless" $) $.Release.Namespace $.Values.clusterDomain) -}}
{{- end -}}
{{- printf "%s%s" (join "," $hosts) $chroot -}}
{{- else -}}
{{- printf "%s%s" .Values.zookeeper.external.connect $chroot -}}
{{- end -}}
{{- end -}}

{{/*
Pod anti-affinity: include "odradek.antiAffinity" (list . "broker" "soft")
*/}}
{{- define "odradek.antiAffinity" -}}
{{- $root := index . 0 -}}
{{- $component := index . 1 -}}
{{- $mode := index . 2 -}}
{{- if eq $mode "soft" }}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "odradek.selectorLabels" (list $root $component) | nindent 12 }}
{{- else if eq $mode "hard" }}
podAntiAffinity:
  requiredDuringSchedulingIgnoredDuringExecution:
    - topologyKey: kubernetes.io/hostname
      labelSelector:
        matchLabels:
          {{- include "odradek.selectorLabels" (list $root $component) | nindent 10 }}
{{- end }}
{{- end -}}

{{/* The broker's minimum of (3, replicas): default replication of the internal topics. */}}
{{- define "odradek.broker.rf" -}}
{{- min 3 (int .Values.broker.replicas) -}}
{{- end -}}

{{/*
What the operator does in a namespace it watches, and nothing more:
- Topic, Quota, User: watch them, patch their metadata (kopf's finalizer and annotations live in
  metadata, so no finalizers subresource is needed) and their status subresource.
- Services: read the bootstrap Service of a cluster (kopf indexes them by label).
- Secrets: generate a User's password Secret (owned by the User, so the garbage collector
  removes it), read one a User names. No list or watch: it never reads other Secrets.
- Events: one per action on a resource.
- StatefulSets: watch the broker StatefulSet's replicas, and patch the annotation that records
  the brokers the partitions were last spread over.
*/}}
{{- define "odradek.operator.namespacedRules" -}}
- apiGroups: [kafka.odradek.io]
  resources: [topics, quotas, users]
  verbs: [get, list, watch, patch]
- apiGroups: [kafka.odradek.io]
  resources: [topics/status, quotas/status, users/status]
  verbs: [get, patch]
- apiGroups: [""]
  resources: [services]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, create, patch]
- apiGroups: [""]
  resources: [events]
  verbs: [create]
- apiGroups: [apps]
  resources: [statefulsets]
  verbs: [get, list, watch, patch]
{{- end -}}
