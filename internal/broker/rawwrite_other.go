//go:build !unix

package broker

import "io"

// rawWriter is the queue's fast path, on unix only: elsewhere every
// message goes through the writer goroutine.
type rawWriter struct{}

func newRawWriter(io.Writer) rawWriter { return rawWriter{} }

func (rawWriter) ok() bool { return false }

func (rawWriter) writeOnce([]byte) int { return 0 }
