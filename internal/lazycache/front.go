package lazycache

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/seed-86a41135/supervisor/internal/jsonrpc"
)

// A lazy client's front (design §11): before any broker runs, the client's
// own process answers its host from the server's verified cache, the way
// a lazy broker with its upstream down would: initialize, ping,
// server/discover and the list calls the cache holds. It answers nothing
// else, and nothing it cannot read exactly as the broker would: the first
// such message ends its part, and the client goes to a broker with the
// handshake the front consumed (Replay: the broker reads it as the
// client's own messages and answers none of it again, so the upstream is
// initialized with the host's own initialize; the pings and list calls
// answered are not kept, so a host's keep-alive pings do not pile up) and
// what it read after (Rest: the broker reads it before the client's
// stdin). So a host that only lists
// what its servers offer starts no broker and no server at all.

// Front limits: what a front consumes goes to the daemon in one run
// request (api.MaxFrame, base64), so a front that would hold more hands
// over instead.
const (
	frontMaxReplay = 64 << 10
	// frontMaxLine: a longer line (no handshake or list call is) goes
	// to the broker as far as it is read; what the front holds stays
	// under twice this.
	frontMaxLine  = 64 << 10
	frontReadSize = 64 << 10
)

// Front answers one client from a cache.
type Front struct {
	cache       *Cache
	initialized bool
	replay      []byte
}

// Handover is what a front leaves to the broker.
type Handover struct {
	Replay []byte // the handshake consumed (initialize, initialized), each line ending in a newline
	Rest   []byte // read and not consumed, starting with the line that needs the broker
}

// errFrontEOF is Serve's word that the client ended its input while the
// front still served it.
var errFrontEOF = errors.New("the client ended its input")

// IsFrontEOF reports whether Serve ended because its client ended its
// input (nothing is left to hand over).
func IsFrontEOF(err error) bool { return errors.Is(err, errFrontEOF) }

// Verified reports whether c, as loaded, can serve a front: warm, and
// every entry of the shape its method must have (a cache that fails the
// check goes to a broker, which drops the bad entries and refills them).
func (c *Cache) Verified() bool {
	if !c.Warm() {
		return false
	}
	return len(c.Clone().Sanitize()) == 0 && len(c.Init) > 0
}

// NewFront returns a front answering from the cache in raw (a Cache as
// JSON), or an error if it cannot serve one.
func NewFront(raw []byte) (*Front, error) {
	var c Cache
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, fmt.Errorf("the lazy-start cache does not decode: %w", err)
	}
	if !c.Verified() {
		return nil, errors.New("the lazy-start cache cannot answer a handshake")
	}
	return &Front{cache: &c}, nil
}

// Answer takes one line (without its newline): the reply to write (nil:
// none) and whether the front consumed it. A line not consumed, and all
// after it, are the broker's.
func (f *Front) Answer(line []byte) (reply []byte, consumed bool) {
	if len(trimSpace(line)) == 0 {
		return nil, true // the broker skips it too
	}
	if len(f.replay)+len(line)+1 > frontMaxReplay {
		return nil, false
	}
	e, err := jsonrpc.Parse(line)
	if err != nil || string(span(line, e.JSONRPC)) != `"2.0"` {
		return nil, false // the broker's to refuse, in its words
	}
	keep := false // what the broker must read again: the handshake
	switch {
	case e.IsRequest():
		id := clone(span(line, e.ID))
		switch e.Method {
		case "ping":
			reply = Result(id, []byte("{}"))
		case "initialize":
			if f.initialized {
				return nil, false
			}
			version := ""
			if sp, err := jsonrpc.Lookup(line, "params", "protocolVersion"); err == nil && sp.Present() {
				version, _ = jsonrpc.DecodeString(span(line, sp))
			}
			if version != f.cache.Requested && version != f.cache.Negotiated {
				return nil, false
			}
			f.initialized, keep = true, true
			reply = Result(id, f.cache.Init)
		default:
			if reply, _ = f.cache.Answer(line, e, id); reply == nil {
				return nil, false
			}
		}
	case e.IsNotification() && e.Method == "notifications/initialized":
		// The broker sends the upstream its own (and drops the client's).
		keep = true
	default:
		return nil, false
	}
	if keep {
		f.replay = append(append(f.replay, line...), '\n')
	}
	return reply, true
}

// Serve answers in's lines on out until one needs the broker, and
// returns what the broker is to read. It ends with an IsFrontEOF error
// when in ends first (the client is done; nothing is handed over), and
// with another error when writing out fails.
func (f *Front) Serve(in io.Reader, out io.Writer) (Handover, error) {
	buf := make([]byte, 0, frontReadSize)
	for {
		for {
			i := bytes.IndexByte(buf, '\n')
			if i < 0 {
				break
			}
			reply, ok := f.Answer(buf[:i])
			if !ok {
				return f.handover(buf), nil
			}
			if reply != nil {
				if _, err := out.Write(append(reply, '\n')); err != nil {
					return Handover{}, fmt.Errorf("answer the client: %w", err)
				}
			}
			buf = buf[i+1:]
		}
		if len(buf) >= frontMaxLine {
			return f.handover(buf), nil // a long line: the broker's to read
		}
		if cap(buf)-len(buf) < frontReadSize {
			grown := make([]byte, len(buf), max(2*cap(buf), len(buf)+frontReadSize))
			copy(grown, buf)
			buf = grown
		}
		n, err := in.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err != nil {
			if len(trimSpace(buf)) > 0 {
				// A last line without its newline: the broker reads it
				// (and then the EOF) as it would have.
				return f.handover(buf), nil
			}
			if errors.Is(err, io.EOF) {
				return Handover{}, errFrontEOF
			}
			return Handover{}, fmt.Errorf("read the client: %w", err)
		}
	}
}

func (f *Front) handover(rest []byte) Handover {
	return Handover{Replay: f.replay, Rest: clone(rest)}
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r' || b[0] == '\n') {
		b = b[1:]
	}
	return b
}
