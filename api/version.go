package api

import (
	"runtime/debug"
	"strconv"
	"strings"
)

// NewerVersion reports whether version a is newer than b, comparing the
// numeric dot-separated parts (a pre-release suffix is ignored); versions
// that do not parse differ, so a is taken as newer.
func NewerVersion(a, b string) bool {
	pa, oka := versionParts(a)
	pb, okb := versionParts(b)
	if !oka || !okb {
		return a != b
	}
	for i := range pa {
		if pa[i] != pb[i] {
			return pa[i] > pb[i]
		}
	}
	return false
}

func versionParts(v string) ([3]int, bool) {
	var out [3]int
	v = strings.TrimPrefix(v, "v")
	if i := strings.IndexAny(v, "-+"); i >= 0 {
		v = v[:i]
	}
	parts := strings.Split(v, ".")
	if len(parts) != 3 {
		return out, false
	}
	for i, p := range parts {
		n, err := strconv.Atoi(p)
		if err != nil {
			return out, false
		}
		out[i] = n
	}
	return out, true
}

// Build is what `supervisor version` reports: the stamped Version, Commit
// and Date, or, where a build was not stamped (go build or go install from
// a checkout, go install pkg@version), what the Go toolchain recorded: the
// module's version and the VCS revision and time. An unknown part is "".
func Build() (version, commit, date string) {
	version, commit, date = Version, Commit, Date
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return version, commit, date
	}
	if v := info.Main.Version; version == "0.1.0-dev" && v != "" && v != "(devel)" {
		version = strings.TrimPrefix(v, "v")
	}
	dirty := false
	for _, s := range info.Settings {
		switch {
		case s.Key == "vcs.revision" && commit == "":
			commit = s.Value
		case s.Key == "vcs.time" && date == "":
			date = s.Value
		case s.Key == "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if dirty && Commit == "" && commit != "" {
		commit += "-dirty"
	}
	return version, commit, date
}
