// Package testmetrics reads what a package registered on a test's
// prometheus.Registry without handing the metric out. A test that holds the
// metric reads it with prometheus/testutil (ToFloat64, GatherAndCount);
// testutil has no reader of one named series of a registry, nor of a
// histogram, which is what this package adds.
package testmetrics

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// Value is the sum of the counter or gauge series named name on g whose
// labels include the given name/value pairs; 0 when there is none yet.
func Value(tb testing.TB, g prometheus.Gatherer, name string, labels ...string) float64 {
	tb.Helper()
	var sum float64
	for _, m := range series(tb, g, name, labels) {
		sum += m.GetCounter().GetValue() + m.GetGauge().GetValue()
	}
	return sum
}

// Histogram returns the sample sum and count of the histogram series named
// name on g whose labels include the given pairs, added up.
func Histogram(tb testing.TB, g prometheus.Gatherer, name string, labels ...string) (sum, count float64) {
	tb.Helper()
	for _, m := range series(tb, g, name, labels) {
		sum += m.GetHistogram().GetSampleSum()
		count += float64(m.GetHistogram().GetSampleCount())
	}
	return sum, count
}

// series returns the series named name whose labels include labels.
func series(tb testing.TB, g prometheus.Gatherer, name string, labels []string) []*dto.Metric {
	tb.Helper()
	if len(labels)%2 != 0 {
		tb.Fatalf("metric %s: labels %q are not name/value pairs", name, labels)
	}
	families, err := g.Gather()
	if err != nil {
		tb.Fatalf("gather metrics: %v", err)
	}
	var out []*dto.Metric
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			if hasLabels(m, labels) {
				out = append(out, m)
			}
		}
	}
	return out
}

func hasLabels(m *dto.Metric, labels []string) bool {
	for i := 0; i < len(labels); i += 2 {
		found := false
		for _, l := range m.GetLabel() {
			found = found || (l.GetName() == labels[i] && l.GetValue() == labels[i+1])
		}
		if !found {
			return false
		}
	}
	return true
}
