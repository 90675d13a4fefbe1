package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/effectd/effectd/internal/pgtest"
)

// The monitoring files shipped under deploy/, relative to this package.
const (
	rulesFile     = "../../deploy/prometheus/effectd-rules.yaml"
	rulesTestFile = "../../deploy/prometheus/effectd-rules_test.yaml"
	dashboardFile = "../../deploy/grafana/effectd-dashboard.json"
)

// lookTool returns the path of a Prometheus program (promtool, prometheus);
// it skips the test when the program is missing, and fails it when CI is set.
func lookTool(t *testing.T, name string) string {
	t.Helper()
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("%s is not installed, and CI is set: .ci/run should have installed it (apt-get install prometheus)", name)
	}
	t.Skipf("%s is not installed (Debian: apt-get install prometheus); skipping outside CI", name)
	return ""
}

// TestPrometheusRules: the rules file is valid and its unit tests
// (deploy/prometheus/effectd-rules_test.yaml, a case per alert) pass.
func TestPrometheusRules(t *testing.T) {
	t.Parallel()
	promtool := lookTool(t, "promtool")
	for _, args := range [][]string{{"check", "rules", rulesFile}, {"test", "rules", rulesTestFile}} {
		if out, err := exec.Command(promtool, args...).CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// ruleFile is the part of a Prometheus rules file the tests read.
type ruleFile struct {
	Groups []struct {
		Rules []struct {
			Record string `yaml:"record"`
			Alert  string `yaml:"alert"`
			Expr   string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// dashboard is the part of a Grafana dashboard the tests read.
type dashboard struct {
	Templating struct {
		List []struct {
			Definition string `json:"definition"`
		} `json:"list"`
	} `json:"templating"`
	Panels []struct {
		Type    string `json:"type"`
		Title   string `json:"title"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
	} `json:"panels"`
}

// exposedName matches a metric name of the families effectd serves (its
// own, the Go runtime's, the process's) inside a PromQL expression; a name
// preceded by ':' is part of a recording rule's name, read separately.
var exposedName = regexp.MustCompile(`(?:^|[^a-zA-Z0-9_:])((?:effectd|process|go)_[a-zA-Z0-9_]+)`)

// recordedName matches the name of a recording rule (level:metric:operations).
var recordedName = regexp.MustCompile(`[a-z_]+:[a-zA-Z0-9_]+:[a-zA-Z0-9_]+`)

// namesIn returns, for each expression, "where: name" of every metric and
// recorded series it names.
func namesIn(where string, expr string, metrics, recorded map[string][]string) {
	for _, m := range exposedName.FindAllStringSubmatch(expr, -1) {
		metrics[m[1]] = append(metrics[m[1]], where)
	}
	for _, r := range recordedName.FindAllString(expr, -1) {
		recorded[r] = append(recorded[r], where)
	}
}

// monitoringNames reads the rules and the dashboard and returns the metric
// names and recorded series each expression names, with where it does, and
// the series the rules record.
func monitoringNames(t *testing.T) (metrics, recorded map[string][]string, records []string) {
	t.Helper()
	metrics, recorded = map[string][]string{}, map[string][]string{}
	var rules ruleFile
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &rules); err != nil {
		t.Fatal(err)
	}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			namesIn("rule "+r.Record+r.Alert, r.Expr, metrics, recorded)
			if r.Record != "" {
				records = append(records, r.Record)
			}
		}
	}
	var dash dashboard
	if b, err = os.ReadFile(dashboardFile); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &dash); err != nil {
		t.Fatal(err)
	}
	panels := 0
	for _, p := range dash.Panels {
		for _, q := range p.Targets {
			namesIn("panel "+p.Title, q.Expr, metrics, recorded)
		}
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		if p.Type != "row" {
			panels++
		}
	}
	for _, v := range dash.Templating.List {
		namesIn("variable", v.Definition, metrics, recorded)
	}
	if len(metrics) < 20 || panels < 15 || len(records) < 5 {
		t.Fatalf("read %d metric names, %d panels and %d recording rules: the files lost their content", len(metrics), panels, len(records))
	}
	return metrics, recorded, records
}

// TestMonitoringNamesExist: every metric a rule or a dashboard panel names is
// on /metrics of a running effectd serve that has done nothing yet (its
// series of each channel start at zero), and every recorded series a panel or
// rule reads is recorded by a rule.
func TestMonitoringNamesExist(t *testing.T) {
	t.Parallel()
	metrics, recorded, records := monitoringNames(t)
	s := newStack(t, pgtest.URL(t))
	_, url := s.serve(t)
	body := string(mustDo(t, "GET", url+"/metrics", "", nil, 200))
	exposed := map[string]bool{}
	for line := range strings.SplitSeq(body, "\n") {
		if name, ok := strings.CutPrefix(line, "# TYPE "); ok {
			name, kind, _ := strings.Cut(name, " ")
			exposed[name] = true
			if kind == "histogram" {
				for _, suffix := range []string{"_bucket", "_sum", "_count"} {
					exposed[name+suffix] = true
				}
			}
		}
	}
	for name, where := range metrics {
		if !exposed[name] {
			t.Errorf("%s, named by %s, is not on /metrics", name, strings.Join(slices.Compact(where), ", "))
		}
	}
	for name, where := range recorded {
		if !slices.Contains(records, name) {
			t.Errorf("%s, read by %s, is recorded by no rule", name, strings.Join(slices.Compact(where), ", "))
		}
	}
}

// promAlert is an alert as Prometheus's /api/v1/alerts lists it.
type promAlert struct {
	Labels map[string]string `json:"labels"`
	State  string            `json:"state"`
}

// TestAlertFiresInRealPrometheus: a real Prometheus scrapes effectd serve and
// evaluates the shipped rules (their "for" cut to 0s and the intervals to a
// second, so that the test takes seconds). An intent left IN_DOUBT fires
// EffectdIntentsInDoubt for its channel; once an operator resolves it, the
// alert resolves.
func TestAlertFiresInRealPrometheus(t *testing.T) {
	t.Parallel()
	prometheus := lookTool(t, "prometheus")
	s := newStack(t, pgtest.URL(t))
	_, url := s.serve(t)

	dir := t.TempDir()
	writeFastRules(t, filepath.Join(dir, "rules.yaml"))
	config := fmt.Sprintf(`global: { scrape_interval: 1s, evaluation_interval: 1s }
rule_files: [rules.yaml]
scrape_configs:
  - job_name: effectd
    static_configs: [{ targets: [%q] }]
`, strings.TrimPrefix(url, "http://"))
	if err := os.WriteFile(filepath.Join(dir, "prometheus.yml"), []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	promAddr := freeAddr(t)
	cmd := exec.Command(prometheus, "--config.file="+filepath.Join(dir, "prometheus.yml"),
		"--storage.tsdb.path="+filepath.Join(dir, "data"), "--web.listen-address="+promAddr, "--log.level=warn")
	var logs bytes.Buffer
	var mu sync.Mutex
	cmd.Stdout = &lockedWriter{w: &logs, mu: &mu}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
		if t.Failed() {
			mu.Lock()
			defer mu.Unlock()
			t.Logf("prometheus logs:\n%s", lastN(logs.String(), 4000))
		}
	})

	// state is the state of EffectdIntentsInDoubt for channel hook, "" when Prometheus lists no such alert.
	state := func() string {
		resp, err := http.Get("http://" + promAddr + "/api/v1/alerts")
		if err != nil {
			return "unreachable"
		}
		defer resp.Body.Close()
		var out struct {
			Data struct{ Alerts []promAlert } `json:"data"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&out); err != nil {
			return "unreadable"
		}
		for _, a := range out.Data.Alerts {
			if a.Labels["alertname"] == "EffectdIntentsInDoubt" && a.Labels["channel"] == "hook" {
				return a.State
			}
		}
		return ""
	}
	// up is whether Prometheus has scraped effectd and evaluated the rules on what it saw.
	up := func() bool {
		resp, err := http.Get("http://" + promAddr + "/api/v1/query?query=" + "max(effectd_in_doubt)%20and%20max(up)%20%3D%3D%201")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		var out struct {
			Data struct{ Result []json.RawMessage } `json:"data"`
		}
		return json.NewDecoder(resp.Body).Decode(&out) == nil && len(out.Data.Result) == 1
	}
	poll(t, 20*time.Second, "Prometheus scrapes effectd", up)
	if st := state(); st != "" {
		t.Fatalf("EffectdIntentsInDoubt is %q before any intent is in doubt", st)
	}

	id := s.insertInDoubt(t, "hook", "unsure")
	poll(t, 15*time.Second, "EffectdIntentsInDoubt firing for hook", func() bool { return state() == "firing" })

	mustDo(t, "POST", fmt.Sprintf("%s/v1/intents/%d/resolve", url, id), adminToken,
		[]byte(`{"as":"skip","reason":"the customer cancelled"}`), 200)
	poll(t, 15*time.Second, "EffectdIntentsInDoubt resolved once the intent is", func() bool { return state() == "" })
	if st := s.status(t, "unsure", "hook"); st != "SKIPPED" {
		t.Fatalf("the resolved intent is %s; want SKIPPED", st)
	}
}

// writeFastRules writes the shipped rules to path with every alert's "for"
// set to 0s, so that an alert fires at the first evaluation that sees its
// condition.
func writeFastRules(t *testing.T, path string) {
	t.Helper()
	b, err := os.ReadFile(rulesFile)
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	for _, g := range doc["groups"].([]any) {
		for _, r := range g.(map[string]any)["rules"].([]any) {
			if rule := r.(map[string]any); rule["alert"] != nil {
				rule["for"] = "0s"
			}
		}
	}
	if b, err = yaml.Marshal(doc); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
