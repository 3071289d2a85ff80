// Command testreport reads `go test -json` on stdin and prints what a
// person reading CI needs: a line per package, the output of every failed
// test and of every package that failed outside a test (a build error, a
// panic, a timeout), each skipped test with its reason, and a last line
// counting tests and subtests: "N passed, N failed, N skipped", after the
// ten slowest top-level tests (where a suite's time goes). It exits
// 1 when anything failed, so `go test -json ... | testreport` under
// pipefail fails as go test would.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
)

// event is one line of test2json's stream.
type event struct {
	Action  string
	Package string
	Test    string
	Elapsed float64
	Output  string
}

type key struct{ pkg, test string }

func main() {
	os.Exit(report(os.Stdin, os.Stdout))
}

func report(in io.Reader, out io.Writer) int {
	output := map[key][]string{}
	var passed, failed, skipped int
	pkgFailed := map[string]bool{}
	testFailed := map[string]bool{} // packages with a failed test
	var timed []timing              // top-level tests that ended
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			fmt.Fprintln(out, sc.Text()) // not test2json: go's own words
			continue
		}
		k := key{e.Package, e.Test}
		switch e.Action {
		case "build-output":
			fmt.Fprint(out, e.Output)
		case "output":
			output[k] = append(output[k], e.Output)
		case "pass", "fail":
			if e.Test != "" && !strings.Contains(e.Test, "/") {
				timed = append(timed, timing{e.Package, e.Test, e.Elapsed})
			}
		}
		switch e.Action {
		case "pass":
			if e.Test == "" {
				fmt.Fprintf(out, "ok   %s %.1fs\n", e.Package, e.Elapsed)
			} else {
				passed++
			}
			delete(output, k)
		case "skip":
			if e.Test == "" {
				fmt.Fprintf(out, "?    %s [no tests to run]\n", e.Package)
			} else {
				skipped++
				fmt.Fprintf(out, "SKIP %s %s: %s\n", e.Package, e.Test, skipReason(output[k]))
			}
			delete(output, k)
		case "fail":
			if e.Test == "" {
				pkgFailed[e.Package] = true
				fmt.Fprintf(out, "FAIL %s %.1fs\n", e.Package, e.Elapsed)
				if !testFailed[e.Package] {
					// What failed outside any test: a timeout, a setup failure.
					fmt.Fprint(out, strings.Join(output[k], ""))
				}
			} else {
				failed++
				testFailed[e.Package] = true
				fmt.Fprintf(out, "--- FAIL %s %s (%.1fs)\n", e.Package, e.Test, e.Elapsed)
				fmt.Fprint(out, strings.Join(output[k], ""))
			}
			delete(output, k)
		}
	}
	if err := sc.Err(); err != nil {
		fmt.Fprintf(out, "testreport: reading go test's output: %v\n", err)
		pkgFailed["(stdin)"] = true
	}
	printSlowest(out, timed, 10)
	fmt.Fprintf(out, "%d passed, %d failed, %d skipped (tests and subtests; %d packages failed)\n", passed, failed, skipped, len(pkgFailed))
	if failed > 0 || len(pkgFailed) > 0 {
		return 1
	}
	return 0
}

// skipReason is the line a skipped test gave as its reason: the last one
// of its output that is not go test's own "--- SKIP" or "=== RUN".
func skipReason(lines []string) string {
	for i := len(lines) - 1; i >= 0; i-- {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "--- SKIP") || strings.HasPrefix(l, "=== ") {
			continue
		}
		return l
	}
	return "(no reason given)"
}

// timing is how long one top-level test took.
type timing struct {
	pkg, test string
	secs      float64
}

// printSlowest prints the n slowest tests, slowest first.
func printSlowest(out io.Writer, timed []timing, n int) {
	if len(timed) == 0 {
		return
	}
	sort.SliceStable(timed, func(i, j int) bool { return timed[i].secs > timed[j].secs })
	fmt.Fprintf(out, "slowest tests:\n")
	for _, t := range timed[:min(n, len(timed))] {
		fmt.Fprintf(out, "  %6.1fs %s %s\n", t.secs, strings.TrimPrefix(t.pkg, "github.com/seed-86a41135/supervisor/"), t.test)
	}
}
