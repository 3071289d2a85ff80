//go:build linux

package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestQuick runs the quick bench end to end in-process (it builds the
// supervisor, starts a private daemon, kills fake hosts) and checks that the
// tables have every figure and the JSON files parse with the same rows.
//
// The figures run in three parts at once, each a bench of its own (--only,
// its own daemon and directory): one after another they took 85 s alone
// and up to 165 s in CI beside the other packages, the longest package of
// the run, mostly waiting on npm and node. Their values are not what this
// test checks (the bench's runs are measured alone: docs/benchmarks.md),
// only that every figure runs and reports as it should.
func TestQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("starts daemons and real processes for a minute or two")
	}
	parts := [][]string{
		{"npx-chain"},
		{"lazy-start", "relay-cost"},
		{"host-death-overhead", "spawn-overhead", "cold-start", "pipe-holder-eof", "spawn-storm", "recovery", "scale", "peers", "shared-memory"},
	}
	inParts := map[string]int{}
	for _, part := range parts {
		for _, fig := range part {
			inParts[fig]++
		}
	}
	for _, fig := range figureNames {
		if inParts[fig] != 1 {
			t.Fatalf("figure %s is in %d of TestQuick's parts, want 1", fig, inParts[fig])
		}
	}

	var (
		mu     sync.Mutex
		tables []string
		res    Results // the figures of every part
	)
	t.Run("parts", func(t *testing.T) {
		for _, part := range parts {
			t.Run(part[0], func(t *testing.T) {
				t.Parallel()
				table, r := quickPart(t, part)
				mu.Lock()
				defer mu.Unlock()
				tables = append(tables, table)
				res.Figures = append(res.Figures, r.Figures...)
			})
		}
	})
	if t.Failed() {
		return
	}
	table := strings.Join(tables, "\n")
	for _, want := range []string{"host-death-overhead", "**overhead**",
		"spawn-overhead", "cold-start", "pipe-holder-eof", "spawn-storm", "servers started per storm",
		"recovery", "**reconcile**", "MiB",
		"scale", "**daemon RSS**", "`daemon stop` → last of the", "peers", "ours: host SIGKILL",
		"shared-memory", "relay-cost", "**added p50, shared − direct**", " µs", " MB/s", "npx-chain"} {
		if !strings.Contains(table, want) {
			t.Errorf("tables lack %q", want)
		}
	}
	seen := map[string]bool{}
	for _, f := range res.Figures {
		seen[f.Figure] = true
		// The recovery and scale figures have their own trial counts (2
		// with --quick; scale's ways of ending alternate), peers 1 per
		// peer (none for a peer skipped as not installed), shared-memory 1
		// (none when the npm servers are not installed).
		n := 3
		switch f.Figure {
		case "recovery":
			n = 2
		case "scale":
			n = 2
			if strings.Contains(f.Metric, "end all") || strings.Contains(f.Metric, "EOF grace") {
				n = 1
			}
		case "peers", "shared-memory":
			n = 1
			if strings.Contains(f.Metric, "SKIPPED") {
				n = 0
			}
		}
		if f.N != n || len(f.Samples) != n {
			t.Errorf("%s / %s: %d samples, want %d", f.Figure, f.Metric, f.N, n)
		}
		if f.Median > f.Max {
			t.Errorf("%s / %s: median %v above the maximum %v", f.Figure, f.Metric, f.Median, f.Max)
		}
		if (f.P99 != nil) != (f.N >= minP99) || (f.P99 != nil && (*f.P99 > f.Max || *f.P99 < f.Median)) {
			t.Errorf("%s / %s: p99 %v over %d samples (median %v, max %v): a p99 is given exactly from %d samples, between the median and the max", f.Figure, f.Metric, f.P99, f.N, f.Median, f.Max, minP99)
		}
		if !strings.Contains(table, f.Metric) && !strings.Contains(table, strings.TrimSpace(f.Metric)) {
			t.Errorf("table lacks row %q", f.Metric)
		}
		// One server per storm and no failed call, in every storm.
		if f.Figure == "spawn-storm" && f.Unit == "count" {
			want := 0.0
			if strings.HasPrefix(f.Metric, "servers started") {
				want = 1
			}
			for _, v := range f.Samples {
				if v != want {
					t.Errorf("%s / %s: sample %v, want %v", f.Figure, f.Metric, v, want)
				}
			}
		}
		// Nothing of the tree survives our stops.
		if f.Figure == "peers" && strings.HasPrefix(f.Metric, "ours") && f.Unit == "count" {
			for _, v := range f.Samples {
				if v != 0 {
					t.Errorf("%s / %s: %v survivors, want 0", f.Figure, f.Metric, v)
				}
			}
		}
		// Half of the 40 records adopted, half lost, in every trial.
		if f.Figure == "recovery" && f.Unit == "count" {
			for _, v := range f.Samples {
				if v != 20 {
					t.Errorf("%s / %s: sample %v, want 20", f.Figure, f.Metric, v)
				}
			}
		}
	}
	// The shared-memory figure saw one server process per client direct,
	// one per server shared: else its trial failed (and so the run).
	for _, f := range res.Figures {
		if f.Figure == "shared-memory" && strings.HasPrefix(f.Metric, "**shared") {
			for _, v := range f.Samples {
				if v <= 0 {
					t.Errorf("%s / %s: %v MiB", f.Figure, f.Metric, v)
				}
			}
		}
	}
	for _, fig := range figureNames {
		if !seen[fig] {
			t.Errorf("results.json lacks %s", fig)
		}
	}
}

// quickPart runs the quick bench's figures only, and checks what every
// run has: one table with its header, a results file that parses, with the
// quick sizes. It returns the table and the results.
func quickPart(t *testing.T, only []string) (string, Results) {
	out := filepath.Join(t.TempDir(), "results.json")
	ctx, cancel := context.WithTimeout(context.Background(), 12*time.Minute)
	defer cancel()
	var stdout, stderr bytes.Buffer
	start := time.Now()
	code := run(ctx, []string{"--quick", "--only", strings.Join(only, ","), "--out", out}, "go test ./cmd/bench", &stdout, &stderr)
	t.Logf("quick bench of %s took %v; stderr:\n%s", only, time.Since(start).Round(time.Millisecond), stderr.String())
	if code != 0 {
		t.Fatalf("bench exited %d", code)
	}
	table := stdout.String()
	t.Logf("table:\n%s", table)
	if n := strings.Count(table, "| figure | metric |"); n != 1 {
		t.Errorf("want one table header, got %d", n)
	}
	for _, want := range []string{"nproc", "go test ./cmd/bench"} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q", want)
		}
	}
	bs, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	var res Results
	if err := json.Unmarshal(bs, &res); err != nil {
		t.Fatalf("results.json does not parse: %v", err)
	}
	if res.StormCalls != 20 || res.StormTrials != 3 {
		t.Errorf("spawn-storm sizes in results.json: %d calls × %d storms, want 20 × 3", res.StormCalls, res.StormTrials)
	}
	if res.Trials != 3 || !res.Quick || res.Machine.NProc < 1 || res.Machine.Kernel == "" {
		t.Errorf("unexpected header in results.json: trials %d quick %v machine %+v", res.Trials, res.Quick, res.Machine)
	}
	for _, f := range res.Figures {
		if !slices.Contains(only, f.Figure) {
			t.Errorf("results.json of --only %s has figure %s", only, f.Figure)
		}
	}
	return table, res
}

func TestStats(t *testing.T) {
	xs := []float64{5, 1, 4, 2, 3}
	if m := median(xs); m != 3 {
		t.Errorf("median = %v, want 3", m)
	}
	if m := median([]float64{1, 2, 3, 4}); m != 2.5 {
		t.Errorf("even median = %v, want 2.5", m)
	}
	if p := percentile(xs, 99); p != 5 {
		t.Errorf("p99 = %v, want 5", p)
	}
	many := make([]float64, 200)
	for i := range many {
		many[i] = float64(i + 1)
	}
	if p := percentile(many, 99); p != 198 {
		t.Errorf("p99 of 1..200 = %v, want 198", p)
	}
}
