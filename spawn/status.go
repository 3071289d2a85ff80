package spawn

import "syscall"

// Status is how a child ended.
type Status struct {
	PID    int
	Code   int            // exit code when Signal is 0
	Signal syscall.Signal // the terminating signal, or 0
	// Unknown: the process was not our child and exited unseen (re-adopted
	// after a daemon restart); Code and Signal mean nothing.
	Unknown bool
}

// ExitCode maps the status the way shells do: the code, or 128+N for
// signal N.
func (s Status) ExitCode() int {
	if s.Signal != 0 {
		return 128 + int(s.Signal)
	}
	return s.Code
}
