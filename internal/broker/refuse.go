package broker

import (
	"fmt"
	"time"

	"github.com/seed-86a41135/supervisor/internal/jsonrpc"
)

// One meaning per message (design §11, issue 26). The broker routes by
// the envelope it reads; a peer that reads another envelope from the same
// bytes would act on another message (answer under an id the broker never
// mapped, cancel another client's call). So a message jsonrpc.Parse finds
// ambiguous is never forwarded, in either direction: a client's request
// is answered with -32600 (to that client only), anything else dropped,
// and every refusal is counted (Stats.Refused) and evented, at most once
// a second. Refusing was chosen over re-encoding a canonical envelope:
// it keeps the relay's promise that what it forwards is the sender's own
// bytes, and no conforming peer ever sends such a message.

// refusedEventEvery rate-limits the "message.refused" event.
const refusedEventEvery = time.Second

// noteRefused counts a refusal and events it unless one was evented
// within the last second. Call with mu held.
func (b *Broker) noteRefused(from string, err error) {
	b.refused++
	now := time.Now()
	if now.Sub(b.refusedAt) < refusedEventEvery {
		return
	}
	b.refusedAt = now
	b.emit("message.refused", fmt.Sprintf("%s: %v (%d refused so far)", from, err, b.refused))
	b.log.Warn("refusing an ambiguous message (logged at most once a second)", "from", from, "err", err, "refused", b.refused)
}

// refuseClient refuses an ambiguous message of c: one with an exact id
// and method is a request, answered with -32600 under that id (to this
// client alone, so a guessed id reaches no one else); one with an exact id
// and no method answers a server-to-client request, which the server is
// told was refused; anything else is dropped. Call with mu held.
func (b *Broker) refuseClient(c *client, line []byte, err error) {
	b.noteRefused("client "+c.id, err)
	idSp, _ := jsonrpc.Lookup(line, "id")
	methodSp, _ := jsonrpc.Lookup(line, "method")
	switch {
	case !idSp.Present():
	case methodSp.Present():
		id := []byte("null")
		if jsonrpc.IDValue(span(line, idSp)) {
			id = clone(span(line, idSp))
		}
		b.deliver(c, errorResponse(id, -32600, "supervisor broker: invalid request, refused: "+err.Error()))
	default:
		if n, ok := parseID(line, idSp); ok {
			if r := b.srvReqs[n]; r != nil && r.c == c {
				delete(b.srvReqs, n)
				b.answerServer(r.up, r.upID, CodeInternal, "supervisor broker: the client's answer was ambiguous and refused: "+err.Error())
			}
		}
	}
}

// refuseUpstream drops an ambiguous message of the upstream; a request in
// flight that the message's exact id names is answered with an error, so
// it is answered once and by no guess. Call with mu held.
func (b *Broker) refuseUpstream(u *upstream, line []byte, err error) {
	b.noteRefused(fmt.Sprintf("upstream pid %d", u.pid), err)
	sp, lerr := jsonrpc.Lookup(line, "id")
	if lerr != nil || !sp.Present() {
		return
	}
	if m, _ := jsonrpc.Lookup(line, "method"); m.Present() {
		return // a request of the server's: it goes unanswered, as it asked ambiguously
	}
	if n, ok := parseID(line, sp); ok {
		if p := b.pending[n]; p != nil {
			b.failPending(n, p, CodeInternal, "supervisor broker: the MCP server's answer was ambiguous (a key written twice or in another case) and was refused: "+err.Error())
		}
	}
}
