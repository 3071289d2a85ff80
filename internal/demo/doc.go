// Package demo is `supervisor demo`: a self-contained tour for a newcomer
// (design §10). It needs nothing but the binary: a private daemon in a
// temporary directory, a fake agent host running three fixture servers
// through `supervisor run`, the host's SIGKILL and the cleanup with timings,
// then a daemon crash and its recovery.
package demo
