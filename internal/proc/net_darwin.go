package proc

// PortListeners would find the processes that hold a socket listening on
// TCP port. macOS has no /proc/net/tcp: mapping a socket to its owner needs
// libproc (proc_pidfdinfo with PROC_PIDFDSOCKETINFO, cgo), which this build
// does not use. It returns nil, so a port held by a stranger is not
// reported before the spawn; the server's own bind failure then is.
func PortListeners(port int) []Listener { return nil }
