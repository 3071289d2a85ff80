package shim

import "golang.org/x/sys/unix"

// dupOnto makes to a copy of from (macOS has no dup3).
func dupOnto(from, to int) error { return unix.Dup2(from, to) }
