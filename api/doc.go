// Package api owns the daemon's wire protocol and its client: where the
// socket lives, how messages are framed, which messages exist, and how file
// descriptors travel with them. It holds no supervision logic.
//
// # Framing
//
// Every message is a 4-byte big-endian length followed by that many bytes of
// JSON, at most MaxFrame. A connection starts with a hello in each direction
// carrying the protocol number and both versions. File descriptors ride on
// the first bytes of a frame as SCM_RIGHTS and are received close-on-exec
// (MSG_CMSG_CLOEXEC), so no server ever inherits another server's pipe.
//
// A malformed, oversized or unknown message is answered with an error
// message and the connection is closed; other connections carry on.
package api
