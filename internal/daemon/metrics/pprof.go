package metrics

import (
	"fmt"
	"net/http"
	"runtime/pprof"
	"runtime/trace"
	"strconv"
	"strings"
	"time"
)

// Go's profiles at /debug/pprof/, written on runtime/pprof directly rather
// than through net/http/pprof: importing that package registers its
// handlers on http's default mux in an init that every `supervisor`
// command would pay at start, `run` included, for a feature only
// `daemon --pprof` uses. What `go tool pprof URL` reads is here: the named
// profiles (?debug=N for text), a CPU profile and an execution trace
// (?seconds=N).

// servePprof answers one /debug/pprof/ request.
func servePprof(w http.ResponseWriter, r *http.Request) {
	name := strings.TrimPrefix(r.URL.Path, "/debug/pprof/")
	switch name {
	case "":
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, "profiles (go tool pprof http://ADDR/debug/pprof/NAME):\n")
		for _, p := range pprof.Profiles() {
			fmt.Fprintf(w, "  %s (%d)\n", p.Name(), p.Count())
		}
		fmt.Fprint(w, "  profile?seconds=N (CPU)\n  trace?seconds=N (execution trace)\n")
	case "profile", "trace":
		secs, err := pprofSeconds(r, name)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		start, stop := pprof.StartCPUProfile, pprof.StopCPUProfile
		if name == "trace" {
			start, stop = trace.Start, trace.Stop
		}
		if err := start(w); err != nil {
			http.Error(w, fmt.Sprintf("start %s: %v", name, err), http.StatusInternalServerError)
			return
		}
		select {
		case <-time.After(secs):
		case <-r.Context().Done():
		}
		stop()
	default:
		p := pprof.Lookup(name)
		if p == nil {
			http.Error(w, fmt.Sprintf("no profile %q: see /debug/pprof/", name), http.StatusNotFound)
			return
		}
		debug, _ := strconv.Atoi(r.FormValue("debug"))
		if debug > 0 {
			w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		} else {
			w.Header().Set("Content-Type", "application/octet-stream")
		}
		if err := p.WriteTo(w, debug); err != nil {
			http.Error(w, fmt.Sprintf("write %s: %v", name, err), http.StatusInternalServerError)
		}
	}
}

// pprofSeconds is a CPU profile's or trace's ?seconds=, with Go's own
// defaults (30 s and 1 s) and at most a minute.
func pprofSeconds(r *http.Request, name string) (time.Duration, error) {
	s := r.FormValue("seconds")
	if s == "" {
		if name == "trace" {
			return time.Second, nil
		}
		return 30 * time.Second, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f <= 0 || f > 60 {
		return 0, fmt.Errorf("seconds=%q: want a number of seconds above 0, at most 60", s)
	}
	return time.Duration(f * float64(time.Second)), nil
}
