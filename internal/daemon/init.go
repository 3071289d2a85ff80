package daemon

import "errors"

// errInitDone ends the daemon's run group once init's work is over.
var errInitDone = errors.New("init: command exited")

// InitSpec is the command `supervisor init` runs as the container's main
// process. Code is set when Run returns: the command's exit status (its
// code, 128+N for signal N, 126/127 when it could not start).
type InitSpec struct {
	Argv []string
	Env  []string
	Dir  string
	Code int
}
