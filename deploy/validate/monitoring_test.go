package validate

import (
	"encoding/json"
	"strings"
	"testing"
)

type ruleFile struct {
	Groups []struct {
		Name     string `json:"name"`
		Interval string `json:"interval,omitempty"`
		Rules    []struct {
			Alert         string            `json:"alert"`
			Expr          string            `json:"expr"`
			For           string            `json:"for,omitempty"`
			KeepFiringFor string            `json:"keep_firing_for,omitempty"`
			Labels        map[string]string `json:"labels"`
			Annotations   map[string]string `json:"annotations"`
		} `json:"rules"`
	} `json:"groups"`
}

func TestAlertRules(t *testing.T) {
	var rf ruleFile
	if err := strictYAML(readFile(t, deployPath("prometheus", "alerts.yml")), &rf); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	var exprs []string
	names := map[string]bool{}
	all := ""
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Alert == "" || r.Expr == "" {
				t.Errorf("group %s: a rule without alert or expr", g.Name)
			}
			if names[r.Alert] {
				t.Errorf("alert %s defined twice", r.Alert)
			}
			names[r.Alert] = true
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				t.Errorf("%s: severity %q", r.Alert, s)
			}
			if r.Annotations["summary"] == "" {
				t.Errorf("%s: no summary", r.Alert)
			}
			exprs = append(exprs, r.Expr)
			all += r.Expr + "\n"
		}
	}
	used := checkMetrics(t, "alerts.yml", exprs)
	t.Logf("metrics in alerts.yml: %v", used)
	// What the deployment promises to watch.
	for _, want := range []string{"bidgate_unpersisted_bids", "bidgate_unpersisted_oldest_seconds",
		"bidgate_unpersisted_lost_bids", "bidgate_relay_lag_seconds", "bidgate_outbox_", `status=~"5.."`,
		"bidgate_bid_duration_seconds_bucket", "0.2", "up{", "bidgate_ring_alive_members"} {
		if !strings.Contains(all, want) {
			t.Errorf("alerts.yml: no rule uses %s", want)
		}
	}
}

// TestAlertRulesWithPromtool: promtool (Debian's prometheus package; CI
// installs it) checks the PromQL and the configuration, and runs the rules'
// unit tests.
func TestAlertRulesWithPromtool(t *testing.T) {
	const install = "apt-get install prometheus"
	tool(t, "promtool", install, "check", "rules", deployPath("prometheus", "alerts.yml"))
	tool(t, "promtool", install, "check", "config", deployPath("prometheus", "prometheus.yml"))
	tool(t, "promtool", install, "test", "rules", deployPath("prometheus", "alerts_test.yml"))
}

// TestKubernetesScrapeConfig: Debian's promtool is built without the
// Kubernetes service discovery, so this file is checked for shape here.
func TestKubernetesScrapeConfig(t *testing.T) {
	var cfg struct {
		Global        map[string]string `json:"global"`
		RuleFiles     []string          `json:"rule_files"`
		ScrapeConfigs []struct {
			JobName             string           `json:"job_name"`
			KubernetesSDConfigs []map[string]any `json:"kubernetes_sd_configs"`
			RelabelConfigs      []struct {
				SourceLabels []string `json:"source_labels"`
				Regex        string   `json:"regex"`
				Action       string   `json:"action"`
				TargetLabel  string   `json:"target_label"`
			} `json:"relabel_configs"`
		} `json:"scrape_configs"`
	}
	if err := strictYAML(readFile(t, deployPath("prometheus", "prometheus-kubernetes.yml")), &cfg); err != nil {
		t.Fatal(err)
	}
	if len(cfg.ScrapeConfigs) != 1 || cfg.ScrapeConfigs[0].KubernetesSDConfigs[0]["role"] != "pod" {
		t.Fatal("want one job discovering pods")
	}
	keep := ""
	for _, r := range cfg.ScrapeConfigs[0].RelabelConfigs {
		if r.Action == "keep" {
			keep += strings.Join(r.SourceLabels, ",") + "=" + r.Regex + ";"
		}
	}
	for _, want := range []string{"__meta_kubernetes_pod_label_app_kubernetes_io_name=bidgate", "__meta_kubernetes_pod_container_port_name=admin"} {
		if !strings.Contains(keep, want) {
			t.Errorf("the job does not keep %s", want)
		}
	}
}

type dashboardPanel struct {
	ID         int                         `json:"id"`
	Type       string                      `json:"type"`
	Title      string                      `json:"title"`
	Datasource *struct{ Type, UID string } `json:"datasource"`
	Targets    []struct {
		Expr       string                      `json:"expr"`
		Datasource *struct{ Type, UID string } `json:"datasource"`
	} `json:"targets"`
	Panels []dashboardPanel `json:"panels"`
}

func TestGrafanaDashboard(t *testing.T) {
	var ds struct {
		APIVersion  int `json:"apiVersion"`
		Datasources []struct {
			Name      string         `json:"name"`
			UID       string         `json:"uid"`
			Type      string         `json:"type"`
			URL       string         `json:"url"`
			Access    string         `json:"access"`
			IsDefault bool           `json:"isDefault"`
			Editable  bool           `json:"editable"`
			JSONData  map[string]any `json:"jsonData"`
		} `json:"datasources"`
	}
	if err := strictYAML(readFile(t, deployPath("grafana", "provisioning", "datasources", "prometheus.yaml")), &ds); err != nil {
		t.Fatal(err)
	}
	if len(ds.Datasources) != 1 || ds.Datasources[0].Type != "prometheus" {
		t.Fatal("want one prometheus datasource")
	}
	uid := ds.Datasources[0].UID

	var d struct {
		UID    string           `json:"uid"`
		Title  string           `json:"title"`
		Panels []dashboardPanel `json:"panels"`
	}
	b := readFile(t, deployPath("grafana", "dashboards", "bidgate.json"))
	if !json.Valid(b) {
		t.Fatal("bidgate.json is not valid JSON")
	}
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	if d.UID == "" || d.Title == "" || len(d.Panels) == 0 {
		t.Fatal("the dashboard needs a uid, a title and panels")
	}
	var exprs []string
	ids := map[int]bool{}
	var walk func([]dashboardPanel)
	walk = func(ps []dashboardPanel) {
		for _, p := range ps {
			if ids[p.ID] {
				t.Errorf("panel id %d repeated", p.ID)
			}
			ids[p.ID] = true
			if p.Type != "row" && (p.Datasource == nil || p.Datasource.UID != uid) {
				t.Errorf("panel %q: datasource is not the provisioned %q", p.Title, uid)
			}
			if p.Type != "row" && len(p.Targets) == 0 {
				t.Errorf("panel %q has no query", p.Title)
			}
			for _, tg := range p.Targets {
				exprs = append(exprs, tg.Expr)
			}
			walk(p.Panels)
		}
	}
	walk(d.Panels)
	used := checkMetrics(t, "bidgate.json", exprs)
	t.Logf("metrics in the dashboard: %v", used)
}
