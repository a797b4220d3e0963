package validate

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/kustomize/api/krusty"
	kusttypes "sigs.k8s.io/kustomize/api/types"
	"sigs.k8s.io/kustomize/kyaml/filesys"
	"sigs.k8s.io/yaml"
)

// apiKinds are the kinds deploy/k8s may contain, with their apiVersion and
// Go type. Anything else is an error: a typo in kind fails here too.
var apiKinds = map[string]struct {
	apiVersion string
	new        func() any
}{
	"StatefulSet":         {"apps/v1", func() any { return &appsv1.StatefulSet{} }},
	"Service":             {"v1", func() any { return &corev1.Service{} }},
	"ServiceAccount":      {"v1", func() any { return &corev1.ServiceAccount{} }},
	"ConfigMap":           {"v1", func() any { return &corev1.ConfigMap{} }},
	"PodDisruptionBudget": {"policy/v1", func() any { return &policyv1.PodDisruptionBudget{} }},
	"NetworkPolicy":       {"networking.k8s.io/v1", func() any { return &networkingv1.NetworkPolicy{} }},
}

// decodeStrict decodes one manifest into its API type; an unknown or
// misspelt field is an error.
func decodeStrict(doc []byte) (any, error) {
	var tm metav1.TypeMeta
	if err := yaml.Unmarshal(doc, &tm); err != nil {
		return nil, err
	}
	k, ok := apiKinds[tm.Kind]
	if !ok {
		return nil, fmt.Errorf("kind %q is not expected in deploy/k8s", tm.Kind)
	}
	if tm.APIVersion != k.apiVersion {
		return nil, fmt.Errorf("%s: apiVersion %q, want %q", tm.Kind, tm.APIVersion, k.apiVersion)
	}
	obj := k.new()
	if err := strictYAML(doc, obj); err != nil {
		return nil, fmt.Errorf("%s: %w", tm.Kind, err)
	}
	return obj, nil
}

func splitYAML(b []byte) [][]byte {
	var docs [][]byte
	for _, d := range regexp.MustCompile(`(?m)^---\s*$`).Split(string(b), -1) {
		if strings.TrimSpace(stripComments(d)) != "" {
			docs = append(docs, []byte(d))
		}
	}
	return docs
}

func stripComments(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if !strings.HasPrefix(strings.TrimSpace(l), "#") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

func TestManifestsDecodeStrictly(t *testing.T) {
	n := 0
	err := filepath.WalkDir(deployPath("k8s"), func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".yaml") {
			return err
		}
		b := readFile(t, path)
		if filepath.Base(path) == "kustomization.yaml" {
			var k kusttypes.Kustomization
			if err := strictYAML(b, &k); err != nil {
				t.Errorf("%s: %v", path, err)
			}
			return nil
		}
		for i, doc := range splitYAML(b) {
			if _, err := decodeStrict(doc); err != nil {
				t.Errorf("%s, document %d: %v", path, i+1, err)
			}
			n++
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 6 {
		t.Fatalf("decoded only %d manifests", n)
	}
	// The strict decoder is what catches a misspelt field.
	bad := []byte("apiVersion: v1\nkind: Service\nmetadata: {name: x}\nspec:\n  clusterIp: None\n")
	if _, err := decodeStrict(bad); err == nil {
		t.Error("a misspelt field (clusterIp) decoded without error")
	}
}

// objects is a rendered kustomization, by kind.
type objects struct {
	sts        []*appsv1.StatefulSet
	services   []*corev1.Service
	configMaps map[string]*corev1.ConfigMap
	pdbs       []*policyv1.PodDisruptionBudget
	netpols    []*networkingv1.NetworkPolicy
	accounts   []*corev1.ServiceAccount
}

func render(t *testing.T, dir string) objects {
	t.Helper()
	k := krusty.MakeKustomizer(krusty.MakeDefaultOptions())
	m, err := k.Run(filesys.MakeFsOnDisk(), dir)
	if err != nil {
		t.Fatalf("kustomize build %s: %v", dir, err)
	}
	o := objects{configMaps: map[string]*corev1.ConfigMap{}}
	for _, r := range m.Resources() {
		y, err := r.AsYAML()
		if err != nil {
			t.Fatal(err)
		}
		obj, err := decodeStrict(y)
		if err != nil {
			t.Fatalf("%s: rendered %s: %v", dir, r.CurId(), err)
		}
		switch v := obj.(type) {
		case *appsv1.StatefulSet:
			o.sts = append(o.sts, v)
		case *corev1.Service:
			o.services = append(o.services, v)
		case *corev1.ConfigMap:
			o.configMaps[v.Name] = v
		case *policyv1.PodDisruptionBudget:
			o.pdbs = append(o.pdbs, v)
		case *networkingv1.NetworkPolicy:
			o.netpols = append(o.netpols, v)
		case *corev1.ServiceAccount:
			o.accounts = append(o.accounts, v)
		}
	}
	return o
}

// kustomizations are the base and every overlay.
func kustomizations(t *testing.T) []string {
	dirs := []string{deployPath("k8s", "base")}
	overlays, _ := filepath.Glob(deployPath("k8s", "overlays", "*", "kustomization.yaml"))
	for _, o := range overlays {
		dirs = append(dirs, filepath.Dir(o))
	}
	if len(dirs) < 2 {
		t.Log("no overlay under deploy/k8s/overlays")
	}
	return dirs
}

func TestKustomizations(t *testing.T) {
	for _, dir := range kustomizations(t) {
		t.Run(filepath.Base(dir), func(t *testing.T) { checkRendered(t, render(t, dir)) })
	}
}

// sensitive names settings that must come from a Secret.
var sensitive = regexp.MustCompile(`(?i)password|secret|cluster_key|signing_key|postgres_url|private`)

// requiredSecrets must be referenced from a Secret by every rendering.
var requiredSecrets = []string{"BIDGATE_CLUSTER_KEY", "BIDGATE_CLUSTER_SECRET", "BIDGATE_EVENT_SIGNING_KEY", "BIDGATE_POSTGRES_URL",
	"BIDGATE_REDIS_PASSWORD", "BIDGATE_KAFKA_SASL_PASSWORD"}

func checkRendered(t *testing.T, o objects) {
	if len(o.sts) != 1 {
		t.Fatalf("want one StatefulSet, got %d", len(o.sts))
	}
	sts := o.sts[0]
	pod := sts.Spec.Template
	podLabels := labels.Set(pod.Labels)
	if sel, err := metav1.LabelSelectorAsSelector(sts.Spec.Selector); err != nil || !sel.Matches(podLabels) {
		t.Errorf("the StatefulSet's selector does not select its pods (%v)", err)
	}
	if len(pod.Spec.Containers) != 1 {
		t.Fatalf("want one container, got %d", len(pod.Spec.Containers))
	}
	c := pod.Spec.Containers[0]
	if sts.Spec.Replicas == nil || *sts.Spec.Replicas < 3 {
		t.Errorf("replicas: want at least 3 (a PDB of maxUnavailable 1 and the alerts expect 3)")
	}
	// OrderedReady: the first pod starts the cluster, the others join it.
	if p := sts.Spec.PodManagementPolicy; p != "" && p != appsv1.OrderedReadyPodManagement {
		t.Errorf("podManagementPolicy %s: parallel pods could each start their own cluster", p)
	}
	if !strings.Contains(c.Image, ":") && !strings.Contains(c.Image, "@") || strings.HasSuffix(c.Image, ":latest") {
		t.Errorf("image %q: pin a tag or a digest", c.Image)
	}
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		t.Errorf("args %v: want serve", c.Args)
	}

	env := effectiveEnv(t, o, c)
	checkBidgateEnv(t, "rendered StatefulSet", env)

	// Listeners: the admin and internal ones default to loopback, which
	// neither the kubelet nor the other pods reach.
	admin := listenPort(t, env, "BIDGATE_ADMIN_LISTEN")
	internal := listenPort(t, env, "BIDGATE_INTERNAL_LISTEN")
	public := 8080
	if _, ok := env["BIDGATE_LISTEN"]; ok {
		public = listenPort(t, env, "BIDGATE_LISTEN")
	}
	gossip := 7946
	if v, ok := env["BIDGATE_GOSSIP_PORT"]; ok {
		gossip, _ = strconv.Atoi(v)
	}
	containerPort := func(port int, proto corev1.Protocol) bool {
		for _, p := range c.Ports {
			if int(p.ContainerPort) == port && protocolOf(p.Protocol) == proto {
				return true
			}
		}
		return false
	}
	for _, p := range []struct {
		port  int
		proto corev1.Protocol
	}{{public, corev1.ProtocolTCP}, {internal, corev1.ProtocolTCP}, {admin, corev1.ProtocolTCP}, {gossip, corev1.ProtocolTCP}, {gossip, corev1.ProtocolUDP}} {
		if !containerPort(p.port, p.proto) {
			t.Errorf("container port %d/%s not declared", p.port, p.proto)
		}
	}
	checkPodAddress(t, c)

	// Probes: on the admin listener, which opens once the node has joined.
	probes := []struct {
		name  string
		probe *corev1.Probe
		paths []string
	}{{"startupProbe", c.StartupProbe, []string{"/healthz", "/readyz"}}, {"livenessProbe", c.LivenessProbe, []string{"/healthz"}},
		{"readinessProbe", c.ReadinessProbe, []string{"/readyz"}}}
	for _, p := range probes {
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s: want an httpGet probe", p.name)
			continue
		}
		g := p.probe.HTTPGet
		if !contains(p.paths, g.Path) {
			t.Errorf("%s: path %q, want one of %v", p.name, g.Path, p.paths)
		}
		if port := resolvePort(t, c, g.Port, corev1.ProtocolTCP); port != admin {
			t.Errorf("%s: port %d, want the admin listener's %d", p.name, port, admin)
		}
	}
	if s := c.StartupProbe; s != nil && s.PeriodSeconds*s.FailureThreshold < 120 {
		t.Errorf("startupProbe allows %d s to join and migrate: too short", s.PeriodSeconds*s.FailureThreshold)
	}

	// Shutdown: preStop, then leave (up to 5 s), then the drain.
	drain := 15 * time.Second
	if v, ok := env["BIDGATE_SHUTDOWN_TIMEOUT"]; ok {
		d, err := time.ParseDuration(v)
		if err != nil {
			t.Fatalf("BIDGATE_SHUTDOWN_TIMEOUT=%q: %v", v, err)
		}
		drain = d
	}
	var preStop time.Duration
	if l := c.Lifecycle; l != nil && l.PreStop != nil && l.PreStop.Sleep != nil {
		preStop = time.Duration(l.PreStop.Sleep.Seconds) * time.Second
	}
	const leave = 5 * time.Second
	grace := 30 * time.Second
	if g := pod.Spec.TerminationGracePeriodSeconds; g != nil {
		grace = time.Duration(*g) * time.Second
	}
	if need := preStop + leave + drain; grace <= need {
		t.Errorf("terminationGracePeriodSeconds %v: must exceed preStop %v + leave %v + drain %v", grace, preStop, leave, drain)
	}

	checkResources(t, c, env)
	checkSecurity(t, pod.Spec, c)
	checkSecretRefs(t, o, c)
	checkServices(t, o, sts, c, public, gossip, env)
	checkPDB(t, o, podLabels, *sts.Spec.Replicas)
	checkNetworkPolicy(t, o, c, podLabels, public, internal, gossip, admin)
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func protocolOf(p corev1.Protocol) corev1.Protocol {
	if p == "" {
		return corev1.ProtocolTCP
	}
	return p
}

// effectiveEnv is the container's environment as bidgate sees it: the
// ConfigMaps of envFrom, then env (which wins). $(VAR) references stay.
func effectiveEnv(t *testing.T, o objects, c corev1.Container) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, f := range c.EnvFrom {
		if f.ConfigMapRef == nil {
			t.Errorf("envFrom: only ConfigMaps expected (secrets go through secretKeyRef)")
			continue
		}
		cm, ok := o.configMaps[f.ConfigMapRef.Name]
		if !ok {
			t.Fatalf("envFrom refers to ConfigMap %q, which the kustomization does not render", f.ConfigMapRef.Name)
		}
		for k, v := range cm.Data {
			env[f.Prefix+k] = v
		}
	}
	defined := map[string]bool{}
	ref := regexp.MustCompile(`\$\(([A-Za-z_][A-Za-z0-9_]*)\)`)
	for _, e := range c.Env {
		for _, m := range ref.FindAllStringSubmatch(e.Value, -1) {
			if !defined[m[1]] {
				t.Errorf("env %s uses $(%s) before it is defined", e.Name, m[1])
			}
		}
		defined[e.Name] = true
		if e.ValueFrom == nil {
			env[e.Name] = e.Value
		} else {
			env[e.Name] = "<from " + e.Name + ">"
		}
	}
	return env
}

// listenPort checks that a listen address is set and not on loopback.
func listenPort(t *testing.T, env map[string]string, name string) int {
	t.Helper()
	v, ok := env[name]
	if !ok {
		t.Errorf("%s is not set: bidgate's default is on loopback", name)
		return -1
	}
	i := strings.LastIndex(v, ":")
	if i < 0 {
		t.Errorf("%s=%q: no port", name, v)
		return -1
	}
	host := strings.Trim(v[:i], "[]")
	if host == "localhost" || strings.HasPrefix(host, "127.") || host == "::1" {
		t.Errorf("%s=%q: on loopback, unreachable from outside the pod", name, v)
	}
	port, err := strconv.Atoi(v[i+1:])
	if err != nil || port == 0 {
		t.Errorf("%s=%q: want a fixed port", name, v)
	}
	return port
}

// checkPodAddress: gossip binds and advertises the pod's IP from the
// downward API.
func checkPodAddress(t *testing.T, c corev1.Container) {
	t.Helper()
	var podIPVar string
	for _, e := range c.Env {
		if e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "status.podIP" {
			podIPVar = e.Name
		}
	}
	if podIPVar == "" {
		t.Fatal("no env variable from the downward API's status.podIP")
	}
	for _, e := range c.Env {
		if e.Name == "BIDGATE_GOSSIP_BIND" || e.Name == "BIDGATE_GOSSIP_ADVERTISE" {
			if e.Value != "$("+podIPVar+")" {
				t.Errorf("%s=%q, want $(%s)", e.Name, e.Value, podIPVar)
			}
			return
		}
	}
	t.Error("BIDGATE_GOSSIP_BIND is not set: the default, 127.0.0.1, cannot reach the other pods")
}

func resolvePort(t *testing.T, c corev1.Container, p intstr.IntOrString, proto corev1.Protocol) int {
	t.Helper()
	if p.Type == intstr.Int {
		return p.IntValue()
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal && protocolOf(cp.Protocol) == proto {
			return int(cp.ContainerPort)
		}
	}
	t.Errorf("no container port named %q/%s", p.StrVal, proto)
	return -1
}

func parseBytes(s string) (int64, error) {
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"B", 1}}
	for _, u := range units {
		if n, ok := strings.CutSuffix(s, u.suffix); ok {
			v, err := strconv.ParseInt(n, 10, 64)
			return v * u.mult, err
		}
	}
	return strconv.ParseInt(s, 10, 64)
}

func checkResources(t *testing.T, c corev1.Container, env map[string]string) {
	t.Helper()
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		req, okReq := c.Resources.Requests[name]
		lim, okLim := c.Resources.Limits[name]
		if !okReq || !okLim || req.IsZero() || lim.IsZero() {
			t.Errorf("resources: want a request and a limit of %s", name)
			continue
		}
		if req.Cmp(lim) > 0 {
			t.Errorf("resources: %s request %s above its limit %s", name, req.String(), lim.String())
		}
	}
	if v, ok := env["GOMEMLIMIT"]; ok {
		n, err := parseBytes(v)
		lim := c.Resources.Limits[corev1.ResourceMemory]
		if err != nil || n <= 0 || n >= lim.Value() {
			t.Errorf("GOMEMLIMIT=%s must be below the memory limit %s", v, lim.String())
		}
	}
}

func checkSecurity(t *testing.T, spec corev1.PodSpec, c corev1.Container) {
	t.Helper()
	nonRoot := spec.SecurityContext != nil && spec.SecurityContext.RunAsNonRoot != nil && *spec.SecurityContext.RunAsNonRoot
	sc := c.SecurityContext
	if sc == nil {
		t.Fatal("the container has no securityContext")
	}
	if sc.RunAsNonRoot != nil {
		nonRoot = *sc.RunAsNonRoot
	}
	if !nonRoot {
		t.Error("runAsNonRoot is not true")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		t.Error("readOnlyRootFilesystem is not true")
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		t.Error("allowPrivilegeEscalation is not false")
	}
	if sc.Capabilities == nil || !contains(capNames(sc.Capabilities.Drop), "ALL") {
		t.Error("capabilities: drop ALL")
	}
	if spec.AutomountServiceAccountToken == nil || *spec.AutomountServiceAccountToken {
		t.Error("automountServiceAccountToken: bidgate needs no API token")
	}
}

func capNames(cs []corev1.Capability) []string {
	var out []string
	for _, c := range cs {
		out = append(out, string(c))
	}
	return out
}

// checkSecretRefs: secrets are referenced from a Secret, never inlined in
// env or a ConfigMap, and no Secret is rendered (so none is committed).
func checkSecretRefs(t *testing.T, o objects, c corev1.Container) {
	t.Helper()
	for name, cm := range o.configMaps {
		for k, v := range cm.Data {
			if sensitive.MatchString(k) {
				t.Errorf("ConfigMap %s holds %s: secrets belong in a Secret", name, k)
			}
			if regexp.MustCompile(`(?i)://[^/@\s]+:[^/@\s]+@`).MatchString(v) {
				t.Errorf("ConfigMap %s: %s holds a URL with a password", name, k)
			}
		}
	}
	refs := map[string]bool{}
	for _, e := range c.Env {
		if sensitive.MatchString(e.Name) {
			if e.Value != "" || e.ValueFrom == nil || e.ValueFrom.SecretKeyRef == nil {
				t.Errorf("env %s: must come from a secretKeyRef", e.Name)
				continue
			}
			if e.ValueFrom.SecretKeyRef.Name == "" || e.ValueFrom.SecretKeyRef.Key == "" {
				t.Errorf("env %s: secretKeyRef without name or key", e.Name)
			}
			refs[e.Name] = true
		}
	}
	for _, name := range requiredSecrets {
		if !refs[name] {
			t.Errorf("%s is not referenced from a Secret", name)
		}
	}
}

func checkServices(t *testing.T, o objects, sts *appsv1.StatefulSet, c corev1.Container, public, gossip int, env map[string]string) {
	t.Helper()
	podLabels := labels.Set(sts.Spec.Template.Labels)
	var headless, client *corev1.Service
	for _, s := range o.services {
		if !labels.SelectorFromSet(s.Spec.Selector).Matches(podLabels) || len(s.Spec.Selector) == 0 {
			t.Errorf("Service %s does not select the bidgate pods", s.Name)
			continue
		}
		if s.Spec.ClusterIP == corev1.ClusterIPNone {
			headless = s
			continue
		}
		for _, p := range s.Spec.Ports {
			if resolvePort(t, c, p.TargetPort, protocolOf(p.Protocol)) == public {
				client = s
			}
		}
	}
	if headless == nil {
		t.Fatal("no headless Service for gossip")
	}
	if sts.Spec.ServiceName != headless.Name {
		t.Errorf("StatefulSet serviceName %q, want the headless Service %q", sts.Spec.ServiceName, headless.Name)
	}
	if !headless.Spec.PublishNotReadyAddresses {
		t.Error("the headless Service must publish not-ready addresses: a node is ready only after it joined")
	}
	if client == nil {
		t.Errorf("no Service sends to the API port %d", public)
	}
	seeds := env["BIDGATE_SEEDS"]
	want := headless.Name + ":" + strconv.Itoa(gossip)
	if seeds != want && !strings.HasPrefix(seeds, headless.Name+".") {
		t.Errorf("BIDGATE_SEEDS=%q, want %q (the headless Service, every pod's address)", seeds, want)
	}
}

func checkPDB(t *testing.T, o objects, podLabels labels.Set, replicas int32) {
	t.Helper()
	if len(o.pdbs) != 1 {
		t.Fatalf("want one PodDisruptionBudget, got %d", len(o.pdbs))
	}
	p := o.pdbs[0]
	sel, err := metav1.LabelSelectorAsSelector(p.Spec.Selector)
	if err != nil || sel.Empty() || !sel.Matches(podLabels) {
		t.Errorf("the PodDisruptionBudget does not select the bidgate pods (%v)", err)
	}
	switch {
	case p.Spec.MaxUnavailable != nil:
		if v := p.Spec.MaxUnavailable.IntValue(); p.Spec.MaxUnavailable.Type == intstr.Int && (v < 1 || int32(v) >= replicas) {
			t.Errorf("maxUnavailable %d: want from 1 to replicas-1", v)
		}
	case p.Spec.MinAvailable != nil:
		if v := p.Spec.MinAvailable.IntValue(); p.Spec.MinAvailable.Type == intstr.Int && int32(v) >= replicas {
			t.Errorf("minAvailable %d blocks every drain with %d replicas", v, replicas)
		}
	default:
		t.Error("the PodDisruptionBudget sets neither maxUnavailable nor minAvailable")
	}
}

// peers says who an ingress rule admits: "anyone", "bidgate" (only bidgate
// pods) or "other".
func peers(rule networkingv1.NetworkPolicyIngressRule, podLabels labels.Set) []string {
	if len(rule.From) == 0 {
		return []string{"anyone"}
	}
	var out []string
	for _, f := range rule.From {
		switch {
		case f.PodSelector != nil && f.NamespaceSelector == nil && f.IPBlock == nil:
			sel, err := metav1.LabelSelectorAsSelector(f.PodSelector)
			if err == nil && !sel.Empty() && sel.Matches(podLabels) && onlyBidgate(f.PodSelector) {
				out = append(out, "bidgate")
			} else {
				out = append(out, "other")
			}
		case f.IPBlock != nil && (f.IPBlock.CIDR == "0.0.0.0/0" || f.IPBlock.CIDR == "::/0"):
			out = append(out, "anyone")
		case f.NamespaceSelector != nil && f.PodSelector == nil && len(f.NamespaceSelector.MatchLabels) == 0 && len(f.NamespaceSelector.MatchExpressions) == 0:
			out = append(out, "anyone") // every pod of every namespace
		default:
			out = append(out, "other")
		}
	}
	return out
}

// onlyBidgate: the selector names the bidgate pods' name label, so it
// cannot match other applications.
func onlyBidgate(s *metav1.LabelSelector) bool {
	return s.MatchLabels["app.kubernetes.io/name"] == "bidgate"
}

func checkNetworkPolicy(t *testing.T, o objects, c corev1.Container, podLabels labels.Set, public, internal, gossip, admin int) {
	t.Helper()
	var applying []*networkingv1.NetworkPolicy
	for _, np := range o.netpols {
		sel, err := metav1.LabelSelectorAsSelector(&np.Spec.PodSelector)
		if err == nil && sel.Matches(podLabels) && !sel.Empty() {
			applying = append(applying, np)
		}
	}
	if len(applying) == 0 {
		t.Fatal("no NetworkPolicy selects the bidgate pods")
	}
	admits := func(port int, proto corev1.Protocol) []string {
		var who []string
		for _, np := range applying {
			if !contains(policyTypes(np), "Ingress") {
				return []string{"anyone"} // not isolated for ingress
			}
			for _, r := range np.Spec.Ingress {
				match := len(r.Ports) == 0
				for _, p := range r.Ports {
					pp := corev1.ProtocolTCP
					if p.Protocol != nil {
						pp = *p.Protocol
					}
					if pp != proto {
						continue
					}
					if p.Port == nil {
						match = true
						continue
					}
					lo := resolvePort(t, c, *p.Port, proto)
					hi := lo
					if p.EndPort != nil {
						hi = int(*p.EndPort)
					}
					if port >= lo && port <= hi {
						match = true
					}
				}
				if match {
					who = append(who, peers(r, podLabels)...)
				}
			}
		}
		return who
	}
	if who := admits(public, corev1.ProtocolTCP); !contains(who, "anyone") {
		t.Errorf("the API port %d is not open to clients (admitted: %v)", public, who)
	}
	for _, p := range []struct {
		name  string
		port  int
		proto corev1.Protocol
	}{{"internal", internal, corev1.ProtocolTCP}, {"gossip", gossip, corev1.ProtocolTCP}, {"gossip", gossip, corev1.ProtocolUDP}} {
		who := admits(p.port, p.proto)
		if len(who) == 0 {
			t.Errorf("%s port %d/%s: closed, the nodes cannot reach each other", p.name, p.port, p.proto)
		}
		for _, w := range who {
			if w != "bidgate" {
				t.Errorf("%s port %d/%s admits %s: bidgate pods only", p.name, p.port, p.proto, w)
			}
		}
	}
	who := admits(admin, corev1.ProtocolTCP)
	if len(who) == 0 {
		t.Errorf("admin port %d: closed to Prometheus", admin)
	}
	if contains(who, "anyone") {
		t.Errorf("admin port %d is open to anyone: /cluster/* and pprof live there", admin)
	}
}

func policyTypes(np *networkingv1.NetworkPolicy) []string {
	if len(np.Spec.PolicyTypes) == 0 {
		return []string{"Ingress"}
	}
	var out []string
	for _, p := range np.Spec.PolicyTypes {
		out = append(out, string(p))
	}
	return out
}

// TestNoSecretsCommitted: nothing under deploy/ looks like a real key.
func TestNoSecretsCommitted(t *testing.T) {
	hexKey := regexp.MustCompile(`\b[0-9a-fA-F]{32,}\b`)
	pem := []byte("PRIVATE KEY-----")
	err := filepath.WalkDir(deployDir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "validate" {
				return filepath.SkipDir // go.sum holds hashes
			}
			return nil
		}
		if d.Name() == ".env" {
			return nil // the operator's own, git-ignored
		}
		b := readFile(t, path)
		if bytes.Contains(b, pem) {
			t.Errorf("%s holds a private key", path)
		}
		if m := hexKey.Find(b); m != nil {
			t.Errorf("%s holds %q, which looks like a key", path, m)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
