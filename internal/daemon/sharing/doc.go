// Package sharing owns what a server shared across sessions is, apart from
// how it is started: the references sessions hold on it, its linger and
// its one-way passage to a stop for good (Refs); one server per port,
// started once however many ensure it at the same time (Slots); and the
// names, keys and questions by which the daemon finds and asks the broker
// of a `run --share` server (brokers.go).
//
// Starting, supervising and stopping a shared server stay in the daemon:
// they are the server start and the cascade every other server goes
// through (design §3 says why that is not a room of its own). Nothing
// here starts or signals a process, or keeps a goroutine running.
package sharing
