package session

// Logger is what the host watcher logs through: hclog.Logger has it. The
// package does not link hclog itself, so that what only identifies a
// host (the lean run entry) stays small.
type Logger interface {
	Debug(msg string, args ...any)
	Error(msg string, args ...any)
}

type nopLogger struct{}

func (nopLogger) Debug(string, ...any) {}
func (nopLogger) Error(string, ...any) {}
