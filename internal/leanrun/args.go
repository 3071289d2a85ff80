package leanrun

import (
	"strconv"

	"strings"
	"time"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/sandbox"
)

// parseArgs reads the flags of `supervisor run` the fast path handles
// (--name, --cwd, --session, --grace, --max-instances, and --lazy,
// --share and --sandbox without a value) up to the "--"
// before the command. Anything else, or anything it cannot read, is why
// the run goes to `supervisor run`, which has every flag and the errors
// that explain them.
func parseArgs(args []string) (Spec, string) {
	var s Spec
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			if i+1 == len(args) {
				return s, "no command after --"
			}
			s.Argv = args[i+1:]
			return s, ""
		}
		// Bare switches of a lazy or shared server: the daemon answers
		// such a run with a front (the cache) or not_in_place.
		switch a {
		case "--lazy":
			s.Lazy = true
			continue
		case "--share":
			s.Share = true
			continue
		case "--sandbox":
			// The daemon plans it and this process confines itself
			// before its exec (RunRequest.Confines).
			s.Sandbox = &sandbox.Spec{Enabled: true}
			continue
		}
		name, val, hasVal := strings.Cut(a, "=")
		switch name {
		case "--name", "--cwd", "--session", "--grace", "--max-instances":
		default:
			return s, "flag " + a + " is for supervisor run"
		}
		if !hasVal {
			if i+1 >= len(args) || args[i+1] == "--" {
				return s, "flag " + name + " needs a value"
			}
			i++
			val = args[i]
		}
		switch name {
		case "--name":
			s.Name = val
		case "--cwd":
			s.Dir = val
		case "--session":
			s.Session = val
		case "--grace":
			d, err := time.ParseDuration(val)
			if err == nil && d >= 0 {
				_, err = api.GraceOf(d.Milliseconds())
			}
			if err != nil || d < 0 {
				return s, "--grace " + val
			}
			s.Grace = d
		case "--max-instances":
			// As pflag reads an int: base prefixes (0x, 0o, 0) included.
			n64, err := strconv.ParseInt(val, 0, 0)
			if err != nil || n64 < 0 {
				return s, "--max-instances " + val
			}
			n := int(n64)
			s.MaxInstances = &n
		}
	}
	return s, "no -- before the command"
}
