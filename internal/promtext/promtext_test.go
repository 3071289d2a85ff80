package promtext

import (
	"slices"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestWriteParses: what Write renders is read back by Prometheus's own
// text parser with every value, label and help text intact, escapes
// included, and histograms cumulative.
func TestWriteParses(t *testing.T) {
	c := NewCounterVec("x_total", "Counted \\ things\nover lines.", "result", "ok", "failed")
	c.Inc("ok")
	c.Add("ok", 2.5)
	c.Add("ok", -1) // ignored: counters only go up
	c.Inc(`odd "value"` + "\n\\")
	h := NewHistogramVec("d_seconds", "Durations.", "reason", []float64{0.1, 1, 0.5}, "stop", "exited")
	for _, x := range []float64{0.05, 0.1, 0.3, 0.7, 3} {
		h.Observe("stop", x)
	}
	g := Gauge{Metric: "a_gauge", Help: "By state.", Label: "state", Values: map[string]float64{"b": 2, "a": 1}}
	one := Gauge{Metric: "b_single", Help: "One.", Values: map[string]float64{"": 1.5}}
	text := Write(c, h, g, one)

	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parse: %v\n%s", err, text)
	}
	if got := fams["x_total"].GetHelp(); got != "Counted \\ things\nover lines." {
		t.Errorf("help read back as %q", got)
	}
	counters := map[string]float64{}
	for _, m := range fams["x_total"].GetMetric() {
		counters[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
	}
	want := map[string]float64{"ok": 3.5, "failed": 0, `odd "value"` + "\n\\": 1}
	for k, v := range want {
		if got, ok := counters[k]; !ok || got != v {
			t.Errorf("counter %q = %v (present %v), want %v", k, got, ok, v)
		}
	}
	if len(counters) != len(want) {
		t.Errorf("counters %v, want %v", counters, want)
	}
	for _, m := range fams["d_seconds"].GetMetric() {
		hist := m.GetHistogram()
		switch m.GetLabel()[0].GetValue() {
		case "stop":
			if hist.GetSampleCount() != 5 || hist.GetSampleSum() != 0.05+0.1+0.3+0.7+3 {
				t.Errorf("stop: count %d sum %v", hist.GetSampleCount(), hist.GetSampleSum())
			}
			var got []uint64
			for _, b := range hist.GetBucket() {
				got = append(got, b.GetCumulativeCount())
			}
			// le 0.1 holds 0.05 and 0.1 (bounds are inclusive), 0.5 adds
			// 0.3, 1 adds 0.7, +Inf adds 3.
			if want := []uint64{2, 3, 4, 5}; !slices.Equal(got, want) {
				t.Errorf("stop buckets %v, want %v", got, want)
			}
		case "exited":
			if hist.GetSampleCount() != 0 {
				t.Errorf("exited: count %d", hist.GetSampleCount())
			}
		}
	}
	if n := len(fams["a_gauge"].GetMetric()); n != 2 {
		t.Errorf("a_gauge: %d series", n)
	}
	if v := fams["b_single"].GetMetric()[0].GetGauge().GetValue(); v != 1.5 {
		t.Errorf("b_single = %v", v)
	}
	// Families are sorted by name, series by label value.
	if i, j := strings.Index(text, "# HELP a_gauge"), strings.Index(text, "# HELP x_total"); i < 0 || j < i {
		t.Errorf("families not sorted:\n%s", text)
	}
	if i, j := strings.Index(text, `a_gauge{state="a"}`), strings.Index(text, `a_gauge{state="b"}`); i < 0 || j < i {
		t.Errorf("series not sorted:\n%s", text)
	}
}

func TestFormatFloat(t *testing.T) {
	for x, want := range map[float64]string{2: "2", 1.5: "1.5", 0.005: "0.005", 1e6: "1e+06"} {
		if got := formatFloat(x); got != want {
			t.Errorf("formatFloat(%v) = %q, want %q", x, got, want)
		}
	}
}
