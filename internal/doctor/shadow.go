package doctor

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// checkShadow reports more than one distinct executable named supervisor
// on PATH: a stale install earlier on PATH serves the wrong binary to every
// host config that names bare `supervisor` (design §1). The same file
// reached twice (a symlink, a hard link, a directory listed twice) is one.
func (d *Doctor) checkShadow() []Finding {
	type install struct {
		path, real string
		st         os.FileInfo
	}
	var found []install
	for _, dir := range filepath.SplitList(d.getenv("PATH")) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue // relative entries depend on the caller's directory
		}
		p := filepath.Join(dir, "supervisor")
		st, err := os.Stat(p)
		if err != nil || !st.Mode().IsRegular() || st.Mode().Perm()&0o111 == 0 {
			continue
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			real = p
		}
		dup := false
		for _, f := range found {
			if os.SameFile(f.st, st) {
				dup = true
			}
		}
		if !dup {
			found = append(found, install{path: p, real: real, st: st})
		}
	}
	if len(found) < 2 {
		return nil
	}
	names := make([]string, len(found))
	for i, f := range found {
		names[i] = f.path
		if f.real != f.path {
			names[i] += " (-> " + f.real + ")"
		}
	}
	ev := fmt.Sprintf("PATH has %d different executables named supervisor, in PATH order: %s", len(found), strings.Join(names, ", "))
	if exe := d.executable(); exe != "" {
		if st, err := os.Stat(exe); err == nil && !os.SameFile(st, found[0].st) {
			ev += fmt.Sprintf("; this binary (%s) is not the one PATH finds", exe)
		}
	}
	others := make([]string, 0, len(found)-1)
	for _, f := range found[1:] {
		others = append(others, f.path)
	}
	return []Finding{{
		Kind: KindShadowInstall, Path: found[0].path, Evidence: ev,
		Fix: fmt.Sprintf("%s wins (it is first on PATH); remove %s, or the one you do not want, so every host runs one supervisor",
			found[0].path, strings.Join(others, " and ")),
	}}
}
