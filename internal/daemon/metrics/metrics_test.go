package metrics

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/seed-86a41135/supervisor/internal/promtext"
	"github.com/seed-86a41135/supervisor/shutdown"
)

// TestMetricsNilSafe: a daemon without metrics pays nothing and panics
// nowhere.
func TestMetricsNilSafe(t *testing.T) {
	var m *Set
	m.Spawn(nil)
	m.Spawn(errors.New("no such file"))
	m.Stopped(shutdown.Outcome{Result: shutdown.Killed})
	m.HealthCheck(nil)
	m.LimitHit("memory_max")
	m.LazyEvents(1, 1, 1, 1)
	m.Refused(1)
	m.CascadeTook("stop", time.Second)
	if _, err := m.Gather(); err == nil {
		t.Error("Gather on a nil Set: no error")
	}
}

// TestMetricsCounters: the counters count, the histogram observes, and
// the Source's gauges are asked at each scrape.
func TestMetricsCounters(t *testing.T) {
	scrapes := 0
	m := New(SourceFunc(func() []promtext.Family {
		scrapes++
		return []promtext.Family{promtext.Gauge{Metric: "test_gauge", Help: "A gauge.", Values: map[string]float64{"": float64(scrapes)}}}
	}))
	m.Spawn(nil)
	m.Spawn(nil)
	m.Spawn(errors.New("exec: not found"))
	m.Stopped(shutdown.Outcome{Result: shutdown.ExitedOnSIGTERM})
	m.HealthCheck(errors.New("refused"))
	m.LazyEvents(1, 0, 3, 4)
	m.Refused(2)
	m.LimitHit("pids_max")
	m.CascadeTook("exited", 300*time.Millisecond)
	text, err := m.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		`supervisor_spawns_total{result="ok"} 2`,
		`supervisor_spawns_total{result="failed"} 1`,
		`supervisor_stops_total{outcome="exited_on_sigterm"} 1`,
		`supervisor_stops_total{outcome="killed"} 0`,
		`supervisor_health_checks_total{result="fail"} 1`,
		`supervisor_lazy_total{event="start"} 1`,
		`supervisor_lazy_total{event="idle_stop"} 0`,
		`supervisor_lazy_total{event="cache_miss"} 4`,
		`supervisor_broker_refused_total{kind="ambiguous"} 2`,
		`supervisor_limit_hits_total{limit="pids_max"} 1`,
		`supervisor_cascade_duration_seconds_count{reason="stop"} 0`,
		`supervisor_cascade_duration_seconds_count{reason="exited"} 1`,
		`supervisor_cascade_duration_seconds_bucket{reason="exited",le="0.25"} 0`,
		`supervisor_cascade_duration_seconds_bucket{reason="exited",le="0.5"} 1`,
		`test_gauge 1`,
	} {
		if !strings.Contains(text, want+"\n") {
			t.Errorf("no %q in:\n%s", want, text)
		}
	}
	if text, _ := m.Gather(); !strings.Contains(text, "test_gauge 2\n") {
		t.Errorf("the second scrape did not ask the Source again:\n%s", text)
	}
}

func TestMetricsOutcomeLabel(t *testing.T) {
	for r, want := range map[shutdown.Result]string{
		shutdown.ExitedOnEOF: "exited_on_eof", shutdown.Unkillable: "could_not_be_killed", "": "unknown",
	} {
		if got := outcomeLabel(r); got != want {
			t.Errorf("outcomeLabel(%q) = %q, want %q", r, got, want)
		}
	}
}

// TestMetricsServer: /metrics serves the Set's exposition, the profiles
// only when asked for, and Stop ends Run.
func TestMetricsServer(t *testing.T) {
	for _, pprof := range []bool{false, true} {
		m := New(nil)
		m.Spawn(nil)
		s, err := Listen("127.0.0.1:0", m, pprof, hclog.NewNullLogger())
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- s.Run() }()
		base := "http://" + s.Addr().String()
		body, ctype := get(t, base+"/metrics", http.StatusOK)
		if ctype != promtext.ContentType || !strings.Contains(body, `supervisor_spawns_total{result="ok"} 1`+"\n") {
			t.Errorf("pprof %v: /metrics: %q %.300q", pprof, ctype, body)
		}
		want := http.StatusNotFound
		if pprof {
			want = http.StatusOK
		}
		get(t, base+"/debug/pprof/goroutine?debug=1", want)
		s.Stop(nil)
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Run: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Fatal("Run did not end after Stop")
		}
	}
}

func get(t *testing.T, url string, status int) (body, contentType string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != status {
		t.Errorf("GET %s: %d, want %d: %.200q", url, resp.StatusCode, status, b)
	}
	return string(b), resp.Header.Get("Content-Type")
}

// TestPprofSeconds: Go's defaults, and a bound on what one request holds.
func TestPprofSeconds(t *testing.T) {
	for _, c := range []struct {
		name, query string
		want        time.Duration
		bad         bool
	}{
		{"profile", "", 30 * time.Second, false},
		{"trace", "", time.Second, false},
		{"profile", "?seconds=0.5", 500 * time.Millisecond, false},
		{"profile", "?seconds=61", 0, true},
		{"trace", "?seconds=x", 0, true},
	} {
		got, err := pprofSeconds(httptest.NewRequest("GET", "/debug/pprof/"+c.name+c.query, nil), c.name)
		if (err != nil) != c.bad || got != c.want {
			t.Errorf("%s%s: %v, %v; want %v (error: %v)", c.name, c.query, got, err, c.want, c.bad)
		}
	}
}
