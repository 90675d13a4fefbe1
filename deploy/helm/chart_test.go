package helm

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	"sigs.k8s.io/yaml"
)

// httpShutdown is how long serve gives the admin API to finish its requests
// on SIGTERM before the drain of provider calls begins (serveLimited in
// cmd/effectd).
const httpShutdown = 5 * time.Second

// helmBinary is the helm of the deploy module's tools, found by TestMain.
var helmBinary string

// helm runs helm with args and returns its standard output.
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(helmBinary, args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("helm %s: %v\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// TestChartLint: helm lint --strict passes, with the optional resources on.
func TestChartLint(t *testing.T) {
	t.Parallel()
	if out, err := helm(t, "lint", "--strict", "effectd", "--set", "prometheusRule.enabled=true,serviceMonitor.enabled=true"); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// manifests are the objects of one rendering of the chart.
type manifests struct {
	deployment *appsv1.Deployment
	jobs       []batchv1.Job
	configMaps []corev1.ConfigMap
	pdbs       []policyv1.PodDisruptionBudget
	kinds      []string
	ruleGroups []string // the groups of the PrometheusRule
}

// render runs helm template with the --set values and decodes its objects.
func render(t *testing.T, set ...string) manifests {
	t.Helper()
	args := []string{"template", "release", "effectd"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	out, err := helm(t, args...)
	if err != nil {
		t.Fatal(err)
	}
	var m manifests
	for doc := range strings.SplitSeq(out, "\n---\n") {
		var head struct {
			Kind string `json:"kind"`
			Spec struct {
				Groups []struct {
					Name string `json:"name"`
				} `json:"groups"`
			} `json:"spec"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatalf("%v in\n%s", err, doc)
		}
		if head.Kind == "" {
			continue
		}
		m.kinds = append(m.kinds, head.Kind)
		var into any
		switch head.Kind {
		case "Deployment":
			m.deployment = &appsv1.Deployment{}
			into = m.deployment
		case "Job":
			m.jobs = append(m.jobs, batchv1.Job{})
			into = &m.jobs[len(m.jobs)-1]
		case "ConfigMap":
			m.configMaps = append(m.configMaps, corev1.ConfigMap{})
			into = &m.configMaps[len(m.configMaps)-1]
		case "PodDisruptionBudget":
			m.pdbs = append(m.pdbs, policyv1.PodDisruptionBudget{})
			into = &m.pdbs[len(m.pdbs)-1]
		case "PrometheusRule":
			for _, g := range head.Spec.Groups {
				m.ruleGroups = append(m.ruleGroups, g.Name)
			}
			continue
		default:
			continue
		}
		if err := yaml.UnmarshalStrict([]byte(doc), into); err != nil {
			t.Fatalf("%s: %v", head.Kind, err)
		}
	}
	return m
}

// problems lists what is wrong with the rendered manifests for running
// effectd; none when all is right.
func problems(m manifests) []string {
	var out []string
	bad := func(format string, a ...any) { out = append(out, fmt.Sprintf(format, a...)) }
	d := m.deployment
	if d == nil {
		return []string{"no Deployment"}
	}
	pod := d.Spec.Template.Spec
	if len(pod.Containers) != 1 {
		return []string{fmt.Sprintf("%d containers; want 1", len(pod.Containers))}
	}
	c := pod.Containers[0]
	if len(c.Args) == 0 || c.Args[0] != "serve" {
		bad("the container runs %q; want serve", c.Args)
	}
	ports := map[string]bool{}
	for _, p := range c.Ports {
		ports[p.Name] = true
	}
	for _, p := range []struct {
		name, path string
		probe      *corev1.Probe
	}{{"readiness", "/readyz", c.ReadinessProbe}, {"liveness", "/healthz", c.LivenessProbe}} {
		switch {
		case p.probe == nil || p.probe.HTTPGet == nil:
			bad("no %s probe by HTTP GET", p.name)
		case p.probe.HTTPGet.Path != p.path:
			bad("the %s probe asks %s; want %s", p.name, p.probe.HTTPGet.Path, p.path)
		case !ports[p.probe.HTTPGet.Port.String()]:
			bad("the %s probe asks port %s, which the container does not name", p.name, p.probe.HTTPGet.Port.String())
		}
	}

	// SIGTERM comes after preStop; then the admin API shuts down and the drain begins.
	drain := 30 * time.Second // serve's default
	for _, a := range c.Args {
		if v, ok := strings.CutPrefix(a, "--drain="); ok {
			var err error
			if drain, err = time.ParseDuration(v); err != nil {
				bad("--drain=%s: %v", v, err)
			}
		}
	}
	var preStop time.Duration
	if c.Lifecycle != nil && c.Lifecycle.PreStop != nil && c.Lifecycle.PreStop.Sleep != nil {
		preStop = time.Duration(c.Lifecycle.PreStop.Sleep.Seconds) * time.Second
	}
	need := preStop + httpShutdown + drain
	if g := pod.TerminationGracePeriodSeconds; g == nil || time.Duration(*g)*time.Second <= need {
		bad("termination grace period %v s is not longer than preStop %s + shutdown %s + drain %s", ptrValue(g), preStop, httpShutdown, drain)
	}
	if r := c.Resources.Requests; r.Cpu().IsZero() || r.Memory().IsZero() {
		bad("the container requests no CPU or no memory: %v", r)
	}
	out = append(out, secure("Deployment", pod, c)...)
	if !slices.ContainsFunc(c.EnvFrom, func(e corev1.EnvFromSource) bool { return e.SecretRef != nil }) {
		bad("the container takes no environment from a Secret")
	}
	for _, e := range c.Env {
		if e.Value != "" && secretName.MatchString(e.Name) {
			bad("environment variable %s holds a literal value; secrets come from a Secret", e.Name)
		}
	}

	// The migrate hook: effectd migrate before install and upgrade, its configuration made before it.
	var migrate *batchv1.Job
	for i, j := range m.jobs {
		if cs := j.Spec.Template.Spec.Containers; len(cs) == 1 && len(cs[0].Args) > 0 && cs[0].Args[0] == "migrate" {
			migrate = &m.jobs[i]
		}
	}
	if migrate == nil {
		bad("no Job runs effectd migrate")
	} else {
		hooks := strings.Split(migrate.Annotations["helm.sh/hook"], ",")
		if !slices.Contains(hooks, "pre-install") || !slices.Contains(hooks, "pre-upgrade") {
			bad("the migrate Job's hooks are %q; want pre-install and pre-upgrade", hooks)
		}
		if migrate.Spec.Template.Spec.RestartPolicy != corev1.RestartPolicyNever {
			bad("the migrate Job's pods restart %q; want Never (the Job retries)", migrate.Spec.Template.Spec.RestartPolicy)
		}
		job := migrate.Spec.Template.Spec
		out = append(out, secure("migrate Job", job, job.Containers[0])...)
		for _, v := range job.Volumes {
			if v.ConfigMap == nil {
				continue
			}
			i := slices.IndexFunc(m.configMaps, func(cm corev1.ConfigMap) bool { return cm.Name == v.ConfigMap.Name })
			switch {
			case i < 0:
				bad("the migrate Job mounts ConfigMap %s, which the chart does not make", v.ConfigMap.Name)
			case m.configMaps[i].Annotations["helm.sh/hook"] != migrate.Annotations["helm.sh/hook"]:
				bad("ConfigMap %s is not a %s hook: it would not exist yet when the migrate Job runs", v.ConfigMap.Name, migrate.Annotations["helm.sh/hook"])
			case weight(m.configMaps[i].Annotations) >= weight(migrate.Annotations):
				bad("ConfigMap %s (hook weight %d) is not made before the migrate Job (weight %d)", v.ConfigMap.Name,
					weight(m.configMaps[i].Annotations), weight(migrate.Annotations))
			}
		}
	}

	podLabels := d.Spec.Template.Labels
	covered := slices.ContainsFunc(m.pdbs, func(p policyv1.PodDisruptionBudget) bool {
		if p.Spec.Selector == nil || (p.Spec.MinAvailable == nil && p.Spec.MaxUnavailable == nil) {
			return false
		}
		for k, v := range p.Spec.Selector.MatchLabels {
			if podLabels[k] != v {
				return false
			}
		}
		return true
	})
	if !covered {
		bad("no PodDisruptionBudget covers the Deployment's pods")
	}
	return out
}

// secretName matches the names of variables that hold secrets.
var secretName = regexp.MustCompile(`TOKEN|SECRET|PASSWORD|DATABASE_URL|API_KEY`)

// secure lists what lets the pod run as root or gain privilege.
func secure(what string, pod corev1.PodSpec, c corev1.Container) []string {
	var out []string
	psc, sc := pod.SecurityContext, c.SecurityContext
	if sc == nil {
		sc = &corev1.SecurityContext{}
	}
	if psc == nil {
		psc = &corev1.PodSecurityContext{}
	}
	nonRoot := cmpPtr(sc.RunAsNonRoot, psc.RunAsNonRoot)
	user := cmpPtr(sc.RunAsUser, psc.RunAsUser)
	switch {
	case nonRoot == nil || !*nonRoot:
		out = append(out, what+": runAsNonRoot is not set")
	case user == nil || *user == 0:
		out = append(out, fmt.Sprintf("%s: runs as user %v; want a non-root uid", what, ptrValue(user)))
	}
	if sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation {
		out = append(out, what+": privilege escalation is allowed")
	}
	if sc.Privileged != nil && *sc.Privileged {
		out = append(out, what+": privileged")
	}
	if sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem {
		out = append(out, what+": the root filesystem is writable")
	}
	if sc.Capabilities == nil || !slices.Contains(sc.Capabilities.Drop, "ALL") || len(sc.Capabilities.Add) > 0 {
		out = append(out, what+": capabilities are not all dropped")
	}
	if pod.AutomountServiceAccountToken == nil || *pod.AutomountServiceAccountToken {
		out = append(out, what+": mounts a service account token it does not use")
	}
	return out
}

// weight is the helm.sh/hook-weight of annotations, 0 when unset.
func weight(annotations map[string]string) int {
	var w int
	fmt.Sscan(annotations["helm.sh/hook-weight"], &w)
	return w
}

// cmpPtr returns the first non-nil pointer.
func cmpPtr[T any](ps ...*T) *T {
	for _, p := range ps {
		if p != nil {
			return p
		}
	}
	return nil
}

// ptrValue is *p, or "unset".
func ptrValue[T any](p *T) any {
	if p == nil {
		return "unset"
	}
	return *p
}

// TestChartManifests: the manifests helm template renders, by default and
// with the optional resources on, have probes on /readyz and /healthz, a
// grace period longer than the drain, the migrate hook, a
// PodDisruptionBudget and no root; and the check catches each of these when
// a value or a manifest is wrong.
func TestChartManifests(t *testing.T) {
	t.Parallel()
	m := render(t, "prometheusRule.enabled=true,serviceMonitor.enabled=true")
	for _, p := range problems(m) {
		t.Errorf("default values: %s", p)
	}
	for _, kind := range []string{"Deployment", "Service", "PodDisruptionBudget", "Job", "PrometheusRule", "ServiceMonitor"} {
		if !slices.Contains(m.kinds, kind) {
			t.Errorf("no %s among %q", kind, m.kinds)
		}
	}
	if !slices.Equal(m.ruleGroups, []string{"effectd.recording", "effectd.alerts"}) {
		t.Errorf("the PrometheusRule has groups %q; want those of deploy/prometheus/effectd-rules.yaml", m.ruleGroups)
	}
	if tls := render(t, "adminTLS.secretName=effectd-tls"); len(problems(tls)) > 0 {
		t.Errorf("with TLS: %q", problems(tls))
	}

	// Each wrong setting must be caught.
	wrong := []struct {
		name   string
		set    []string
		edit   func(*manifests)
		caught string
	}{
		{name: "grace period shorter than the drain", set: []string{"terminationGracePeriodSeconds=30"}, caught: "termination grace period"},
		{name: "a drain longer than the grace period", set: []string{"drain=1m"}, caught: "termination grace period"},
		{name: "no migrate hook", set: []string{"migrate.enabled=false"}, caught: "no Job runs effectd migrate"},
		{name: "no resource requests", set: []string{"resources=null"}, caught: "requests no CPU"},
		{name: "readiness on /healthz", edit: func(m *manifests) {
			m.deployment.Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet.Path = "/healthz"
		}, caught: "the readiness probe asks /healthz"},
		{name: "no liveness probe", edit: func(m *manifests) { m.deployment.Spec.Template.Spec.Containers[0].LivenessProbe = nil }, caught: "no liveness probe"},
		{name: "root", edit: func(m *manifests) {
			root := int64(0)
			m.deployment.Spec.Template.Spec.Containers[0].SecurityContext.RunAsUser = &root
		}, caught: "Deployment: runs as user 0"},
		{name: "migrate after install", edit: func(m *manifests) { m.jobs[0].Annotations["helm.sh/hook"] = "post-install,post-upgrade" }, caught: "want pre-install and pre-upgrade"},
		{name: "migrate before its configuration", edit: func(m *manifests) { m.jobs[0].Annotations["helm.sh/hook-weight"] = "-20" }, caught: "is not made before the migrate Job"},
		{name: "no PodDisruptionBudget", edit: func(m *manifests) { m.pdbs = nil }, caught: "no PodDisruptionBudget"},
	}
	for _, w := range wrong {
		m := render(t, w.set...)
		if w.edit != nil {
			w.edit(&m)
		}
		ps := problems(m)
		if !slices.ContainsFunc(ps, func(p string) bool { return strings.Contains(p, w.caught) }) {
			t.Errorf("%s: problems %q; want one saying %q", w.name, ps, w.caught)
		}
	}
}

func TestMain(m *testing.M) {
	// go tool -n builds helm into the build cache when it is not there yet,
	// and prints its path.
	out, err := exec.Command("go", "tool", "-n", "helm").Output()
	if err != nil {
		fmt.Fprintf(os.Stderr, "building helm (go tool -n helm): %v\n", err)
		os.Exit(1)
	}
	helmBinary = strings.TrimSpace(string(out))
	os.Exit(m.Run())
}
