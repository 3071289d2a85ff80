package top

import (
	"strings"
	"testing"
	"time"

	"github.com/seed-86a41135/supervisor/api"
)

func snapshot() Snapshot {
	now := time.Unix(1_800_000_000, 0)
	procs := []api.Process{
		{ID: "p-1", Session: "s1", Name: "fs", State: api.StateRunning, StartedAt: now.Add(-time.Hour), Restarts: 2,
			Usage: &api.Usage{MemoryBytes: 64 << 20, MemorySource: "procs", CPUPercent: 1, Procs: 1}},
		{ID: "p-2", Session: "s1", Name: "spin", State: api.StateRunning, StartedAt: now.Add(-time.Minute),
			Usage: &api.Usage{MemoryBytes: 2 << 20, MemorySource: "procs", CPUPercent: 99, Procs: 3}},
		{ID: "p-3", Session: "s2", Name: "gone", State: api.StateExited},
		{ID: "p-4", Name: "shared-one", State: api.StateRunning, Broker: true, StartedAt: now.Add(-2 * time.Hour),
			Clients: []api.BrokerClient{{ID: "c1"}, {ID: "c2"}}, LimitHit: []string{"pids_max"}},
	}
	sessions := []api.SessionInfo{{Session: api.Session{ID: "s1", HostCommand: "/usr/bin/node /opt/claude/cli.js --resume"}},
		{Session: api.Session{ID: "s2", HostCommand: "codex"}}}
	return Build(procs, sessions, now)
}

func TestBuildAndSort(t *testing.T) {
	snap := snapshot()
	if len(snap.Rows) != 3 || snap.Sessions != 2 {
		t.Fatalf("rows %+v: want the 3 running ones, 2 sessions", snap.Rows)
	}
	for _, tc := range []struct {
		by   string
		want string // the names in order
	}{
		{"mem", "fs spin shared-one"}, {"cpu", "spin fs shared-one"}, {"name", "fs shared-one spin"},
		{"age", "shared-one fs spin"}, {"restarts", "fs shared-one spin"}, {"host", "shared-one fs spin"},
	} {
		rows := append([]Row(nil), snap.Rows...)
		Sort(rows, tc.by)
		var got []string
		for _, r := range rows {
			got = append(got, r.Name)
		}
		if strings.Join(got, " ") != tc.want {
			t.Errorf("sort by %s: %v, want %s", tc.by, got, tc.want)
		}
	}
	for _, r := range snap.Rows {
		switch r.Name {
		case "fs":
			if r.Host != "cli.js" {
				t.Errorf("fs's host %q, want the node script's name", r.Host)
			}
		case "shared-one":
			if r.Session != "shared" || r.Host != "2 clients" || r.State != "running(pids_max)" {
				t.Errorf("broker row %+v: want shared, its clients and its limit hit", r)
			}
		}
	}
}

func TestRender(t *testing.T) {
	if out := Render(snapshot(), "cpu", 0, 0); !strings.Contains(out, "3 servers, 66.0M memory, 100.0% CPU - sorted by cpu") {
		t.Errorf("header of:\n%s\nwant the servers summed and the sort named", out)
	}
	if out := Render(snapshot(), "cpu", 0, 7); strings.Count(out, "\n") != 7 || strings.Contains(out, "more") {
		t.Errorf("in 7 lines:\n%s\nwant every row", out)
	}
	out := Render(snapshot(), "cpu", 80, 6)
	for _, l := range strings.Split(out, "\n") {
		if len([]rune(l)) > 80 {
			t.Errorf("line wider than 80: %q", l)
		}
	}
	if strings.Count(out, "\n") != 6 || !strings.Contains(out, "spin") || !strings.Contains(out, "... 2 more") {
		t.Errorf("in 6 lines:\n%s\nwant the first row and a count of the rest", out)
	}
}

// One server is "1 server", and a session id is shown whole, however long
// (up to maxSessionWidth): it is how a host's servers are found elsewhere.
func TestRenderWordsAndWholeSessionIDs(t *testing.T) {
	now := time.Unix(1_800_000_000, 0)
	long := "host-1234567-98765432101"
	snap := Build([]api.Process{{ID: "p-1", Session: long, Name: "fs", State: api.StateRunning, StartedAt: now}},
		[]api.SessionInfo{{Session: api.Session{ID: long}}}, now)
	out := Render(snap, "name", 0, 0)
	if !strings.Contains(out, "1 session, 1 server,") {
		t.Errorf("header of:\n%s\nwant \"1 session, 1 server\"", out)
	}
	if !strings.Contains(out, long+"  ") {
		t.Errorf("table:\n%s\nwant the session id %s whole", out, long)
	}
	huge := strings.Repeat("x", 60)
	snap = Build([]api.Process{{ID: "p-1", Session: huge, Name: "fs", State: api.StateRunning, StartedAt: now}}, nil, now)
	if out := Render(snap, "name", 0, 0); strings.Contains(out, huge) || !strings.Contains(out, strings.Repeat("x", maxSessionWidth-1)+"~") {
		t.Errorf("table:\n%s\nwant a %d-cell id cut at %d with ~", out, len(huge), maxSessionWidth)
	}
}
