package sandbox

import (
	"errors"
	"os"
)

// sandboxExec is macOS's runner of Seatbelt profiles.
const sandboxExec = "/usr/bin/sandbox-exec"

// Support says what macOS can enforce: the filesystem, the network and
// signals, through sandbox-exec, where it is installed.
func Support() Capabilities {
	if _, err := os.Stat(sandboxExec); err != nil {
		return Capabilities{Why: sandboxExec + " is missing"}
	}
	return Capabilities{Mechanism: "seatbelt", Filesystem: true, Network: true, Scoping: true}
}

// Confine fails on macOS: a process cannot confine itself there without
// cgo; its command is wrapped in sandbox-exec instead (Wrap).
func Confine(Rules) error {
	return errors.New("cannot sandbox: on macOS the command is wrapped in sandbox-exec, not confined in place")
}

// Confined fails on macOS: a command is wrapped in sandbox-exec there
// (Wrap), not started from a confined thread.
func Confined(Rules, func() error) error {
	return errors.New("cannot sandbox: on macOS the command is wrapped in sandbox-exec, not confined in place")
}

// LimitResources does nothing on macOS: a process's limits cannot be set
// from outside it there (no prlimit); docs/sandbox.md says core dumps
// stay as the user's limits have them.
func LimitResources(int, Rules) error { return nil }

// Wrap is the command that runs path (argv) under r: sandbox-exec with
// r's profile, which execs it in its own place.
func Wrap(path string, argv []string, r Rules) (string, []string) {
	out := append([]string{"sandbox-exec", "-p", Profile(r), path}, argv[1:]...)
	return sandboxExec, out
}
