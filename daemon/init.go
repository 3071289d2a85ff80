package daemon

// InitSpec is the command `supervisor init` runs as the container's main
// process. Code is set when Run returns: the command's exit status (its
// code, 128+N for signal N, 126/127 when it could not start).
type InitSpec struct {
	Argv []string
	Env  []string
	Dir  string
	Code int
}
