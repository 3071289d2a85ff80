//go:build linux

package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/settings"
)

// ps and sessions show what a running server costs: a server that holds
// 48 MiB and spins is seen with at least that much memory, CPU used and
// its process count, in the table and in --json, and its session sums it;
// the metrics sum it too, and by name with --metrics-names.
func TestPsShowsUsage(t *testing.T) {
	t.Parallel()
	in := newInstance(t)
	in.env = append(in.env, settings.EnvMetricsNames+"=1") // for the daemon run starts
	s := in.startShim("--session", "usage-t", "--name", "burn", "--", "sh", "-c",
		`echo ready $$; x=$(head -c 50331648 /dev/zero | tr '\0' a); while :; do :; done`)
	s.readyPID(t)
	var burn api.Process
	deadline := time.Now().Add(wait)
	for time.Now().Before(deadline) {
		for _, p := range in.mustProcesses(false) {
			if p.Name == "burn" {
				burn = p
			}
		}
		if u := burn.Usage; u != nil && u.MemoryBytes > 48<<20 && u.CPUSeconds > 0.3 {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	u := burn.Usage
	if u == nil || u.MemoryBytes <= 48<<20 || u.CPUSeconds <= 0.3 || u.Procs < 1 || u.MemorySource == "" || u.CPUPercent <= 0 {
		t.Fatalf("burn's usage %+v: want over 48 MiB, CPU used and a process, measured", u)
	}
	out := in.mustRun("ps")
	var row []string
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[2] == "burn" {
			row = f
		}
	}
	head := strings.Fields(strings.SplitN(out, "\n", 2)[0])
	if len(row) < 8 || head[5] != "MEM" || !strings.HasSuffix(row[5], "M") || head[6] != "CPU" || !strings.HasSuffix(row[6], "%") || head[7] != "PROCS" || row[7] == "-" {
		t.Errorf("ps:\n%s\nwant burn's MEM in MiB, its CPU %% and PROCS", out)
	}
	var sessions []api.SessionInfo
	if err := json.Unmarshal([]byte(in.mustRun("sessions", "--json")), &sessions); err != nil {
		t.Fatal(err)
	}
	var got *api.Usage
	for _, se := range sessions {
		if se.ID == "usage-t" {
			got = se.Usage
		}
	}
	if got == nil || got.MemoryBytes < 48<<20 || got.Procs < 1 {
		t.Errorf("session usage-t's usage %+v: want its server's summed", got)
	}
	metrics := in.mustRun("metrics")
	for _, family := range []string{"supervisor_servers_memory_bytes ", `supervisor_server_memory_bytes{name="burn"} `} {
		v := -1.0
		for _, line := range strings.Split(metrics, "\n") {
			if rest, ok := strings.CutPrefix(line, family); ok {
				v, _ = strconv.ParseFloat(rest, 64)
			}
		}
		if v < 48<<20 {
			t.Errorf("metrics: %s%v, want burn's memory counted", family, v)
		}
	}
}
