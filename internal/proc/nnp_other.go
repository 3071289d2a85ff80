//go:build !linux

package proc

// NoNewPrivs is false where there is no such flag to read.
func NoNewPrivs(int) (bool, error) { return false, nil }
