//go:build linux

package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// parseMetrics reads a text exposition.
func parseMetrics(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parse metrics: %v\n%s", err, text)
	}
	return fams
}

// sample is the value of family name's series whose labels include want
// (summed over the others; a histogram gives its count).
func sample(fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	f := fams[name]
	if f == nil {
		return -1
	}
	var sum float64
next:
	for _, m := range f.GetMetric() {
		for k, v := range want {
			found := false
			for _, l := range m.GetLabel() {
				if l.GetName() == k && l.GetValue() == v {
					found = true
				}
			}
			if !found {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			sum += m.GetCounter().GetValue()
		case m.Gauge != nil:
			sum += m.GetGauge().GetValue()
		case m.Histogram != nil:
			sum += float64(m.GetHistogram().GetSampleCount())
		}
	}
	return sum
}

func scrape(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatalf("scrape %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil || resp.StatusCode != http.StatusOK {
		t.Fatalf("scrape %s: status %d, err %v: %s", url, resp.StatusCode, err, b)
	}
	return string(b)
}

func familyNames(fams map[string]*dto.MetricFamily) []string {
	var out []string
	for n := range fams {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// TestMetricsEndpoint: an auto-started daemon given SUPERVISOR_METRICS_ADDR
// serves /metrics, and after spawns, a stop and a breaker opening the
// counters have moved; `supervisor metrics` prints the same families.
func TestMetricsEndpoint(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
	in.env = append(in.env, "SUPERVISOR_METRICS_ADDR="+addr)
	url := "http://" + addr + "/metrics"

	in.mustRun("daemon") // detached: the address travels in its environment
	before := parseMetrics(t, scrape(t, url))
	if v := sample(before, "supervisor_spawns_total", map[string]string{"result": "ok"}); v != 0 {
		t.Fatalf("fresh daemon: supervisor_spawns_total{result=ok} = %v, want 0", v)
	}

	in.mustRun("run", "--", bin, "_fixture", "exit", "0")
	s := in.startShim("--name", "sleeper", "--", bin, "_fixture", "sleep")
	s.readyPID(t)
	in.mustRun("stop", "sleeper", "--grace", "2s")
	s.exitCode(t)
	for range 3 {
		in.run("run", "--name", "crashy", "--", "/bin/sh", "-c", "exit 3")
	}

	var fams map[string]*dto.MetricFamily
	checks := func() []string {
		var bad []string
		check := func(name string, labels map[string]string, ok func(float64) bool, want string) {
			if v := sample(fams, name, labels); !ok(v) {
				bad = append(bad, fmt.Sprintf("%s%v = %v, want %s", name, labels, v, want))
			}
		}
		atLeast := func(n float64) func(float64) bool { return func(v float64) bool { return v >= n } }
		check("supervisor_spawns_total", map[string]string{"result": "ok"}, atLeast(5), ">= 5")
		check("supervisor_breakers", map[string]string{"state": "open"}, func(v float64) bool { return v == 1 }, "1")
		check("supervisor_stops_total", nil, atLeast(1), ">= 1")
		check("supervisor_cascade_duration_seconds", map[string]string{"reason": "stop"}, atLeast(1), "a count >= 1")
		check("supervisor_processes", map[string]string{"state": "exited"}, atLeast(5), ">= 5")
		check("supervisor_sessions", nil, atLeast(1), ">= 1")
		check("supervisor_recovery_adopted", nil, atLeast(0), "present")
		check("supervisor_health_checks_total", map[string]string{"result": "pass"}, atLeast(0), "present")
		return bad
	}
	deadline := time.Now().Add(wait)
	for {
		fams = parseMetrics(t, scrape(t, url))
		bad := checks()
		if len(bad) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after spawns, a stop and a breaker opening:\n%s", strings.Join(bad, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}

	cli := parseMetrics(t, in.mustRun("metrics"))
	if got, want := strings.Join(familyNames(cli), " "), strings.Join(familyNames(fams), " "); got != want {
		t.Errorf("supervisor metrics families:\n%s\nwant those of /metrics:\n%s", got, want)
	}
	if v := sample(cli, "supervisor_breakers", map[string]string{"state": "open"}); v != 1 {
		t.Errorf("supervisor metrics: supervisor_breakers{state=open} = %v, want 1", v)
	}

	// The endpoint stops with the daemon.
	in.mustRun("daemon", "stop")
	if resp, err := http.Get(url); err == nil {
		resp.Body.Close()
		t.Errorf("%s still answers after the daemon stopped", url)
	}
}

// TestMetricsAddrRefusedWhenUnusable: a --metrics-addr the daemon cannot
// listen on stops it from starting, saying why.
func TestMetricsAddrRefusedWhenUnusable(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	cmd := in.command("daemon", "--foreground", "--metrics-addr", "127.0.0.1:notaport")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || !strings.Contains(string(out), "--metrics-addr 127.0.0.1:notaport") {
		t.Fatalf("daemon with a bad --metrics-addr: err %v, output %q; want a refusal naming the flag", err, out)
	}
	if in.daemonPID() != 0 {
		t.Fatal("a daemon answers on the socket although its --metrics-addr was unusable")
	}
}

// TestMetricsWithoutEndpoint: `supervisor metrics` works without
// --metrics-addr (it asks over the socket).
func TestMetricsWithoutEndpoint(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	in.mustRun("daemon")
	fams := parseMetrics(t, in.mustRun("metrics"))
	for _, name := range []string{"supervisor_spawns_total", "supervisor_stops_total", "supervisor_cascade_duration_seconds",
		"supervisor_sessions", "supervisor_processes", "supervisor_breakers", "supervisor_recovery_adopted",
		"supervisor_recovery_lost", "supervisor_recovery_stopped", "supervisor_recovery_duration_seconds",
		"supervisor_health_checks_total"} {
		if fams[name] == nil {
			t.Errorf("supervisor metrics lacks %s; has %v", name, familyNames(fams))
		}
	}
}

// TestPprofOptIn: Go's profiles are on the metrics address only with
// --pprof (here through the environment of an auto-started daemon), and
// --pprof without an address is refused with what to add.
func TestPprofOptIn(t *testing.T) {
	t.Parallel()
	for _, on := range []bool{false, true} {
		t.Run(fmt.Sprint(on), func(t *testing.T) {
			in := newInstance(t)
			addr := "127.0.0.1:" + strconv.Itoa(freePort(t))
			in.env = append(in.env, "SUPERVISOR_METRICS_ADDR="+addr)
			if on {
				in.env = append(in.env, "SUPERVISOR_PPROF=1")
			}
			in.mustRun("daemon")
			scrape(t, "http://"+addr+"/metrics") // up
			resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if got := resp.StatusCode == 200 && strings.Contains(string(body), "goroutine"); got != on {
				t.Fatalf("pprof %v: GET /debug/pprof/goroutine: %d %.200q", on, resp.StatusCode, body)
			}
			if !on {
				return
			}
			// What `go tool pprof URL` reads: gzipped protobuf profiles.
			for _, path := range []string{"heap", "profile?seconds=0.2"} {
				code, body := get(t, "http://"+addr+"/debug/pprof/"+path)
				if code != 200 || !bytes.HasPrefix(body, []byte{0x1f, 0x8b}) {
					t.Fatalf("GET /debug/pprof/%s: %d %.60q, want a gzipped profile", path, code, body)
				}
			}
			if code, body := get(t, "http://"+addr+"/debug/pprof/profile?seconds=x"); code != 400 || !strings.Contains(string(body), "seconds") {
				t.Fatalf("GET /debug/pprof/profile?seconds=x: %d %q, want 400 naming seconds", code, body)
			}
			if code, _ := get(t, "http://"+addr+"/debug/pprof/nosuch"); code != 404 {
				t.Fatalf("GET /debug/pprof/nosuch: %d, want 404", code)
			}
		})
	}
	in := newInstance(t)
	_, errOut, code := in.run("daemon", "--foreground", "--pprof")
	if code == 0 || !strings.Contains(errOut, "--pprof needs --metrics-addr") {
		t.Fatalf("daemon --pprof without an address: exit %d, %q", code, errOut)
	}
}

// get is one HTTP GET: its status and body.
func get(t *testing.T, url string) (int, []byte) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return resp.StatusCode, body
}
