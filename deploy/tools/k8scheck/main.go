// Command k8scheck validates Kubernetes manifests offline, without a cluster:
//
//	go run . ../../kubernetes
//
// Every YAML document is decoded strictly into its Kubernetes API type, so an
// unknown or misspelt field, a wrong type or a duplicate key is an error
// (kubectl --dry-run=client needs an API server to map kinds, and
// --validate=false checks nothing). Then erpsync's deployment rules are
// checked: resource requests, a non-root read-only securityContext,
// credentials only through secretKeyRef/secretRef to a Secret defined in the
// directory, references between objects (ConfigMap, Secret, volumes, ports,
// selectors), and the CronJob, Indexed Job and Deployment settings that the
// job lock and graceful shutdown rely on.
//
// It prints one line per document and every problem, and exits 1 when there
// is any.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// secretEnv are the settings that must come from the Secret, never a literal.
var secretEnv = map[string]bool{
	"ERPSYNC_MYSQL_DSN":      true,
	"ERPSYNC_POSTGRES_DSN":   true,
	"ERPSYNC_REDIS_PASSWORD": true,
	"ERPSYNC_ERP_TOKEN":      true,
}

type doc struct {
	file string
	idx  int
	kind string
	name string
	obj  any
}

func (d doc) String() string { return fmt.Sprintf("%s#%d %s/%s", d.file, d.idx, d.kind, d.name) }

type checker struct {
	docs []doc
	errs []string
}

func (c *checker) errorf(d doc, format string, args ...any) {
	c.errs = append(c.errs, d.String()+": "+fmt.Sprintf(format, args...))
}

func main() {
	dir := "."
	if len(os.Args) > 1 {
		dir = os.Args[1]
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.y*ml"))
	if err != nil || len(files) == 0 {
		fmt.Fprintf(os.Stderr, "k8scheck: no *.yaml in %s\n", dir)
		os.Exit(2)
	}
	sort.Strings(files)
	c := &checker{}
	for _, f := range files {
		c.load(f)
	}
	c.checkAll()
	for _, d := range c.docs {
		fmt.Printf("  decoded %s\n", d)
	}
	if len(c.errs) > 0 {
		for _, e := range c.errs {
			fmt.Println("  ERROR", e)
		}
		fmt.Printf("k8scheck: %d problem(s) in %d object(s)\n", len(c.errs), len(c.docs))
		os.Exit(1)
	}
	fmt.Printf("k8scheck: %d object(s) in %d file(s) OK\n", len(c.docs), len(files))
}

func (c *checker) load(path string) {
	data, err := os.ReadFile(path)
	base := filepath.Base(path)
	if err != nil {
		c.errs = append(c.errs, base+": "+err.Error())
		return
	}
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for i := 0; ; i++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			c.errs = append(c.errs, fmt.Sprintf("%s#%d: %v", base, i, err))
			return
		}
		if len(bytes.TrimSpace(stripComments(raw))) == 0 {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal(raw, &tm); err != nil {
			c.errs = append(c.errs, fmt.Sprintf("%s#%d: %v", base, i, err))
			continue
		}
		var meta struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		_ = yaml.Unmarshal(raw, &meta)
		obj, ok := newObject(tm.APIVersion, tm.Kind)
		d := doc{file: base, idx: i, kind: tm.Kind, name: meta.Metadata.Name}
		if !ok {
			c.errorf(d, "unsupported apiVersion/kind %q/%q", tm.APIVersion, tm.Kind)
			continue
		}
		if err := yaml.UnmarshalStrict(raw, obj); err != nil {
			c.errorf(d, "strict decode: %v", err)
			continue
		}
		d.obj = obj
		c.docs = append(c.docs, d)
	}
}

func stripComments(b []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(b, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			out = append(out, line...)
			out = append(out, '\n')
		}
	}
	return out
}

func newObject(apiVersion, kind string) (any, bool) {
	switch apiVersion + "/" + kind {
	case "v1/ConfigMap":
		return &corev1.ConfigMap{}, true
	case "v1/Secret":
		return &corev1.Secret{}, true
	case "v1/Service":
		return &corev1.Service{}, true
	case "apps/v1/Deployment":
		return &appsv1.Deployment{}, true
	case "batch/v1/Job":
		return &batchv1.Job{}, true
	case "batch/v1/CronJob":
		return &batchv1.CronJob{}, true
	case "policy/v1/PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, true
	}
	return nil, false
}

func objectMeta(obj any) *metav1.ObjectMeta {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		return &o.ObjectMeta
	case *corev1.Secret:
		return &o.ObjectMeta
	case *corev1.Service:
		return &o.ObjectMeta
	case *appsv1.Deployment:
		return &o.ObjectMeta
	case *batchv1.Job:
		return &o.ObjectMeta
	case *batchv1.CronJob:
		return &o.ObjectMeta
	case *policyv1.PodDisruptionBudget:
		return &o.ObjectMeta
	}
	panic(fmt.Sprintf("objectMeta: %T", obj))
}

func (c *checker) checkAll() {
	configMaps := map[string]map[string]bool{}
	secrets := map[string]map[string]bool{}
	seen := map[string]bool{}
	for _, d := range c.docs {
		key := d.kind + "/" + d.name
		if seen[key] {
			c.errorf(d, "defined twice")
		}
		seen[key] = true
		c.checkMeta(d, objectMeta(d.obj))
		switch o := d.obj.(type) {
		case *corev1.ConfigMap:
			configMaps[o.Name] = keys(o.Data)
			for k := range o.Data {
				if secretEnv[k] {
					c.errorf(d, "credential %s belongs in the Secret, not a ConfigMap", k)
				}
			}
		case *corev1.Secret:
			ks := keys(o.StringData)
			for k := range o.Data {
				ks[k] = true
			}
			secrets[o.Name] = ks
		}
	}
	var templates []*corev1.PodTemplateSpec
	for _, d := range c.docs {
		switch o := d.obj.(type) {
		case *appsv1.Deployment:
			c.checkDeployment(d, o)
			c.checkPod(d, &o.Spec.Template, configMaps, secrets)
			templates = append(templates, &o.Spec.Template)
		case *batchv1.Job:
			c.checkJobSpec(d, &o.Spec)
			c.checkPod(d, &o.Spec.Template, configMaps, secrets)
		case *batchv1.CronJob:
			c.checkCronJob(d, o)
			c.checkJobSpec(d, &o.Spec.JobTemplate.Spec)
			c.checkPod(d, &o.Spec.JobTemplate.Spec.Template, configMaps, secrets)
		}
	}
	for _, d := range c.docs {
		switch o := d.obj.(type) {
		case *corev1.Service:
			c.checkService(d, o, templates)
		case *policyv1.PodDisruptionBudget:
			sel, err := metav1.LabelSelectorAsSelector(o.Spec.Selector)
			if err != nil || o.Spec.Selector == nil {
				c.errorf(d, "selector: %v", err)
				continue
			}
			if matching(sel, templates) == 0 {
				c.errorf(d, "selector %s matches no Deployment's pods", sel)
			}
		}
	}
}

func keys[V any](m map[string]V) map[string]bool {
	out := map[string]bool{}
	for k := range m {
		out[k] = true
	}
	return out
}

func (c *checker) checkMeta(d doc, m *metav1.ObjectMeta) {
	if m.Name == "" {
		c.errorf(d, "metadata.name is empty")
	}
	for _, e := range validation.IsDNS1123Subdomain(m.Name) {
		c.errorf(d, "metadata.name %q: %s", m.Name, e)
	}
	c.checkLabels(d, "metadata.labels", m.Labels)
	for k := range m.Annotations {
		for _, e := range validation.IsQualifiedName(k) {
			c.errorf(d, "annotation %q: %s", k, e)
		}
	}
}

func (c *checker) checkLabels(d doc, where string, l map[string]string) {
	for k, v := range l {
		for _, e := range validation.IsQualifiedName(k) {
			c.errorf(d, "%s key %q: %s", where, k, e)
		}
		for _, e := range validation.IsValidLabelValue(v) {
			c.errorf(d, "%s %s=%q: %s", where, k, v, e)
		}
	}
}

func (c *checker) checkPod(d doc, t *corev1.PodTemplateSpec, configMaps, secrets map[string]map[string]bool) {
	c.checkLabels(d, "template labels", t.Labels)
	for k := range t.Annotations {
		for _, e := range validation.IsQualifiedName(k) {
			c.errorf(d, "template annotation %q: %s", k, e)
		}
	}
	p := &t.Spec
	if len(p.Containers) == 0 {
		c.errorf(d, "pod has no containers")
	}
	if p.SecurityContext == nil || p.SecurityContext.RunAsNonRoot == nil || !*p.SecurityContext.RunAsNonRoot {
		c.errorf(d, "pod securityContext.runAsNonRoot must be true")
	}
	if p.SecurityContext != nil && p.SecurityContext.RunAsUser != nil && *p.SecurityContext.RunAsUser == 0 {
		c.errorf(d, "pod securityContext.runAsUser is 0 (root)")
	}
	if p.TerminationGracePeriodSeconds == nil {
		c.errorf(d, "terminationGracePeriodSeconds not set")
	}
	volumes := map[string]bool{}
	for _, v := range p.Volumes {
		volumes[v.Name] = true
	}
	names := map[string]bool{}
	for i := range p.Containers {
		names[p.Containers[i].Name] = true
	}
	for i := range p.Containers {
		ct := &p.Containers[i]
		where := "container " + ct.Name
		if ct.Image == "" {
			c.errorf(d, "%s: no image", where)
		}
		req := ct.Resources.Requests
		if _, ok := req[corev1.ResourceCPU]; !ok {
			c.errorf(d, "%s: resources.requests.cpu not set", where)
		}
		if _, ok := req[corev1.ResourceMemory]; !ok {
			c.errorf(d, "%s: resources.requests.memory not set", where)
		}
		if _, ok := ct.Resources.Limits[corev1.ResourceMemory]; !ok {
			c.errorf(d, "%s: resources.limits.memory not set", where)
		}
		for r, q := range req {
			if l, ok := ct.Resources.Limits[r]; ok && q.Cmp(l) > 0 {
				c.errorf(d, "%s: request %s %s above its limit %s", where, r, q.String(), l.String())
			}
		}
		sc := ct.SecurityContext
		switch {
		case sc == nil:
			c.errorf(d, "%s: no securityContext", where)
		default:
			if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
				c.errorf(d, "%s: securityContext.readOnlyRootFilesystem must be true", where)
			}
			if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
				c.errorf(d, "%s: securityContext.allowPrivilegeEscalation must be false", where)
			}
			if sc.Capabilities == nil || !containsCap(sc.Capabilities.Drop, "ALL") {
				c.errorf(d, "%s: securityContext.capabilities.drop must contain ALL", where)
			}
		}
		for _, m := range ct.VolumeMounts {
			if !volumes[m.Name] {
				c.errorf(d, "%s: volumeMount %q has no volume", where, m.Name)
			}
		}
		ports := map[string]bool{}
		for _, cp := range ct.Ports {
			if cp.Name != "" {
				ports[cp.Name] = true
			}
		}
		for name, pr := range map[string]*corev1.Probe{"startupProbe": ct.StartupProbe, "livenessProbe": ct.LivenessProbe, "readinessProbe": ct.ReadinessProbe} {
			if pr == nil || pr.HTTPGet == nil {
				continue
			}
			if pn := pr.HTTPGet.Port.StrVal; pn != "" && !ports[pn] {
				c.errorf(d, "%s: %s port %q is not a container port name", where, name, pn)
			}
		}
		envSeen := map[string]bool{}
		for _, e := range ct.Env {
			if envSeen[e.Name] {
				c.errorf(d, "%s: env %s defined twice", where, e.Name)
			}
			envSeen[e.Name] = true
			if secretEnv[e.Name] && (e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil) {
				c.errorf(d, "%s: %s must come from a secretKeyRef, not a literal", where, e.Name)
			}
			if e.ValueFrom == nil {
				continue
			}
			if r := e.ValueFrom.SecretKeyRef; r != nil {
				if ks, ok := secrets[r.Name]; !ok {
					c.errorf(d, "%s: env %s: Secret %q is not defined here", where, e.Name, r.Name)
				} else if !ks[r.Key] {
					c.errorf(d, "%s: env %s: Secret %q has no key %q", where, e.Name, r.Name, r.Key)
				}
			}
			if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
				if ks, ok := configMaps[r.Name]; !ok || !ks[r.Key] {
					c.errorf(d, "%s: env %s: ConfigMap %q key %q is not defined here", where, e.Name, r.Name, r.Key)
				}
			}
			if r := e.ValueFrom.ResourceFieldRef; r != nil && r.ContainerName != "" && !names[r.ContainerName] {
				c.errorf(d, "%s: env %s: resourceFieldRef names unknown container %q", where, e.Name, r.ContainerName)
			}
		}
		for _, ef := range ct.EnvFrom {
			if r := ef.ConfigMapRef; r != nil {
				if _, ok := configMaps[r.Name]; !ok {
					c.errorf(d, "%s: envFrom ConfigMap %q is not defined here", where, r.Name)
				}
			}
			if r := ef.SecretRef; r != nil {
				if _, ok := secrets[r.Name]; !ok {
					c.errorf(d, "%s: envFrom Secret %q is not defined here", where, r.Name)
				}
			}
		}
		// --grace must end before the kubelet's SIGKILL.
		if g, ok := flagValue(ct.Args, "--grace"); ok && p.TerminationGracePeriodSeconds != nil {
			dur, err := time.ParseDuration(g)
			if err != nil {
				c.errorf(d, "%s: --grace %q: %v", where, g, err)
			} else if dur >= time.Duration(*p.TerminationGracePeriodSeconds)*time.Second {
				c.errorf(d, "%s: --grace %s is not below terminationGracePeriodSeconds %d", where, g, *p.TerminationGracePeriodSeconds)
			}
		}
	}
}

func containsCap(cs []corev1.Capability, want corev1.Capability) bool {
	for _, c := range cs {
		if c == want {
			return true
		}
	}
	return false
}

// flagValue finds --name=value or --name value in args.
func flagValue(args []string, name string) (string, bool) {
	for i, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			return v, true
		}
		if a == name && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}

func (c *checker) checkDeployment(d doc, o *appsv1.Deployment) {
	sel, err := metav1.LabelSelectorAsSelector(o.Spec.Selector)
	if err != nil || o.Spec.Selector == nil {
		c.errorf(d, "selector: %v", err)
	} else if !sel.Matches(labels.Set(o.Spec.Template.Labels)) {
		c.errorf(d, "selector %s does not match the template labels", sel)
	}
	for i := range o.Spec.Template.Spec.Containers {
		ct := &o.Spec.Template.Spec.Containers[i]
		if len(ct.Args) == 0 || (ct.Args[0] != "schedule" && ct.Args[0] != "relay") {
			continue
		}
		cmd := ct.Args[0]
		if ct.LivenessProbe == nil || ct.LivenessProbe.HTTPGet == nil || ct.LivenessProbe.HTTPGet.Path != "/healthz" {
			c.errorf(d, "%s container %s: livenessProbe must GET /healthz", cmd, ct.Name)
		}
		if ct.ReadinessProbe == nil || ct.ReadinessProbe.HTTPGet == nil || ct.ReadinessProbe.HTTPGet.Path != "/readyz" {
			c.errorf(d, "%s container %s: readinessProbe must GET /readyz", cmd, ct.Name)
		}
		if addr, ok := flagValue(ct.Args, "--http-addr"); ok {
			_, port, _ := strings.Cut(addr, ":")
			found := false
			for _, cp := range ct.Ports {
				found = found || strconv.Itoa(int(cp.ContainerPort)) == port
			}
			if !found {
				c.errorf(d, "%s container %s: --http-addr %s has no containerPort", cmd, ct.Name, addr)
			}
		}
		if cmd != "relay" {
			continue
		}
		// One relay delivers at a time (the relay lock): a second replica
		// would only skip, and a rolling update would start it beside the
		// first.
		if o.Spec.Replicas == nil || *o.Spec.Replicas != 1 {
			c.errorf(d, "relay container %s: replicas must be 1 (a second relay only skips on the lock)", ct.Name)
		}
		if o.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
			c.errorf(d, "relay container %s: strategy must be Recreate (a rolling update runs two relays)", ct.Name)
		}
		if _, ok := flagValue(ct.Args, "--grace"); !ok {
			c.errorf(d, "relay container %s: no --grace (the batch in hand must be marked before the SIGKILL)", ct.Name)
		}
		if _, ok := flagValue(ct.Args, "--events-secret"); ok {
			c.errorf(d, "relay container %s: --events-secret on the command line; mount the secret and give --events-secret-file", ct.Name)
		}
	}
}

func (c *checker) checkJobSpec(d doc, s *batchv1.JobSpec) {
	if s.ActiveDeadlineSeconds == nil {
		c.errorf(d, "activeDeadlineSeconds not set")
	}
	if s.BackoffLimit == nil && s.BackoffLimitPerIndex == nil {
		c.errorf(d, "neither backoffLimit nor backoffLimitPerIndex is set")
	}
	rp := s.Template.Spec.RestartPolicy
	if rp != corev1.RestartPolicyNever && rp != corev1.RestartPolicyOnFailure {
		c.errorf(d, "restartPolicy %q: a Job needs Never or OnFailure", rp)
	}
	if s.PodFailurePolicy != nil {
		if rp != corev1.RestartPolicyNever {
			c.errorf(d, "podFailurePolicy needs restartPolicy Never")
		}
		if s.PodReplacementPolicy != nil && *s.PodReplacementPolicy != batchv1.Failed {
			c.errorf(d, "podReplacementPolicy must be Failed with podFailurePolicy")
		}
		for _, r := range s.PodFailurePolicy.Rules {
			if r.OnExitCodes != nil && r.OnExitCodes.ContainerName != nil {
				ok := false
				for _, ct := range s.Template.Spec.Containers {
					ok = ok || ct.Name == *r.OnExitCodes.ContainerName
				}
				if !ok {
					c.errorf(d, "podFailurePolicy names unknown container %q", *r.OnExitCodes.ContainerName)
				}
			}
			if r.Action == batchv1.PodFailurePolicyActionFailIndex && s.BackoffLimitPerIndex == nil {
				c.errorf(d, "podFailurePolicy FailIndex needs backoffLimitPerIndex")
			}
		}
	}
	if s.CompletionMode != nil && *s.CompletionMode == batchv1.IndexedCompletion {
		if s.Completions == nil || s.Parallelism == nil || *s.Completions != *s.Parallelism {
			c.errorf(d, "Indexed Job: completions and parallelism must be set and equal")
		}
		for _, ct := range s.Template.Spec.Containers {
			shards, idx := "", false
			for _, e := range ct.Env {
				if e.Name == "ERPSYNC_SHARDS" {
					shards = e.Value
				}
				if e.Name == "JOB_COMPLETION_INDEX" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil &&
					strings.Contains(e.ValueFrom.FieldRef.FieldPath, "batch.kubernetes.io/job-completion-index") {
					idx = true
				}
			}
			if s.Completions != nil && shards != strconv.Itoa(int(*s.Completions)) {
				c.errorf(d, "Indexed Job container %s: ERPSYNC_SHARDS=%q must equal completions %d", ct.Name, shards, *s.Completions)
			}
			if !idx {
				c.errorf(d, "Indexed Job container %s: JOB_COMPLETION_INDEX must come from the job-completion-index annotation", ct.Name)
			}
			if _, ok := flagValue(ct.Args, "--shard"); ok {
				c.errorf(d, "Indexed Job container %s: --shard would override the per-pod shard", ct.Name)
			}
		}
	}
}

var cronField = regexp.MustCompile(`^(\*|\d+(-\d+)?)(/\d+)?(,(\*|\d+(-\d+)?)(/\d+)?)*$`)

func (c *checker) checkCronJob(d doc, o *batchv1.CronJob) {
	fields := strings.Fields(o.Spec.Schedule)
	if len(fields) != 5 {
		c.errorf(d, "schedule %q: want 5 fields", o.Spec.Schedule)
	}
	for _, f := range fields {
		if !cronField.MatchString(f) {
			c.errorf(d, "schedule %q: bad field %q", o.Spec.Schedule, f)
		}
	}
	if o.Spec.ConcurrencyPolicy != batchv1.ForbidConcurrent {
		c.errorf(d, "concurrencyPolicy %q: want Forbid", o.Spec.ConcurrencyPolicy)
	}
	if o.Spec.StartingDeadlineSeconds != nil && *o.Spec.StartingDeadlineSeconds < 10 {
		c.errorf(d, "startingDeadlineSeconds below 10 can make the CronJob never start")
	}
}

func (c *checker) checkService(d doc, o *corev1.Service, templates []*corev1.PodTemplateSpec) {
	if len(o.Spec.Selector) == 0 {
		c.errorf(d, "service has no selector")
		return
	}
	sel := labels.SelectorFromSet(o.Spec.Selector)
	if matching(sel, templates) == 0 {
		c.errorf(d, "selector %s matches no Deployment's pods", sel)
		return
	}
	for _, sp := range o.Spec.Ports {
		name := sp.TargetPort.StrVal
		if name == "" {
			continue
		}
		found := false
		for _, t := range templates {
			if !sel.Matches(labels.Set(t.Labels)) {
				continue
			}
			for _, ct := range t.Spec.Containers {
				for _, cp := range ct.Ports {
					found = found || cp.Name == name
				}
			}
		}
		if !found {
			c.errorf(d, "port %s: targetPort %q is no container port of the selected pods", sp.Name, name)
		}
	}
}

func matching(sel labels.Selector, templates []*corev1.PodTemplateSpec) int {
	n := 0
	for _, t := range templates {
		if sel.Matches(labels.Set(t.Labels)) {
			n++
		}
	}
	return n
}
