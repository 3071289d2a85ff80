package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"syscall"
)

// MaxFrame bounds one message; a larger length prefix is refused before any
// allocation. A run request carries the shim's whole environment, which is
// rarely above a few KiB; the kernel's own argv+env limit is 2 MiB.
const MaxFrame = 4 << 20

// maxFds bounds the descriptors accepted with one frame.
const maxFds = 8

// Sentinel protocol errors.
var (
	ErrFrameTooLarge = errors.New("frame exceeds the size limit")
	ErrMalformed     = errors.New("malformed message")
	ErrTooManyFds    = errors.New("too many file descriptors with one message")
)

// MaxReply bounds one frame from the daemon to a client: listings (ps,
// sessions, events) grow with the table, and the client trusts its own
// daemon (same uid, checked). Requests to the daemon stay under MaxFrame.
const MaxReply = 64 << 20

// Decode unmarshals m's body into v, naming the message type on failure.
func Decode(m Msg, v any) error {
	if len(m.Body) == 0 {
		return fmt.Errorf("%w: %s has no body", ErrMalformed, m.Type)
	}
	if err := json.Unmarshal(m.Body, v); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrMalformed, m.Type, err)
	}
	return nil
}

// encodeMsg renders Msg{typ, body} exactly as json.Marshal would, without
// marshalling the body twice: a RawMessage field is re-scanned and
// compacted by json.Marshal, which for a long listing costs as much as
// encoding it.
func encodeMsg(typ string, body any) ([]byte, error) {
	t, err := json.Marshal(typ)
	if err != nil {
		return nil, err
	}
	if body == nil {
		return append(append([]byte(`{"type":`), t...), '}'), nil
	}
	b, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(`{"type":,"body":}`)+len(t)+len(b))
	out = append(out, `{"type":`...)
	out = append(out, t...)
	out = append(out, `,"body":`...)
	out = append(out, b...)
	return append(out, '}'), nil
}

// SetLimits sets the largest frame c receives and sends. A client takes
// replies up to MaxReply; the daemon sends them.
func (c *Conn) SetLimits(recv, send int) { c.maxRecv, c.maxSend = recv, send }

// SendError sends an error message.
func (c *Conn) SendError(code int, format string, args ...any) error {
	return c.Send(TypeError, &Error{Message: fmt.Sprintf(format, args...), Code: code})
}

// encodeFrame is the JSON payload of one message, refused when it is
// larger than limit.
func encodeFrame(typ string, body any, limit int) ([]byte, error) {
	payload, err := encodeMsg(typ, body)
	if err != nil {
		return nil, fmt.Errorf("encode %s: %w", typ, err)
	}
	if len(payload) > limit {
		return nil, fmt.Errorf("send %s of %d bytes: %w", typ, len(payload), ErrFrameTooLarge)
	}
	return payload, nil
}

// checkFrameLen refuses a length prefix before anything is allocated for
// it.
func checkFrameLen(n uint32, limit int) error {
	if int64(n) > int64(limit) {
		return fmt.Errorf("frame of %d bytes (limit %d): %w", n, limit, ErrFrameTooLarge)
	}
	if n == 0 {
		return fmt.Errorf("empty frame: %w", ErrMalformed)
	}
	return nil
}

// decodeFrame parses one frame's JSON payload.
func decodeFrame(buf []byte) (Msg, error) {
	var m Msg
	if err := json.Unmarshal(buf, &m); err != nil {
		return Msg{}, fmt.Errorf("%w: %v", ErrMalformed, err)
	}
	if m.Type == "" {
		return Msg{}, fmt.Errorf("%w: no type", ErrMalformed)
	}
	return m, nil
}

// PeerGone says err is the other side having gone: EOF, a cut frame, a
// reset connection, or a write to a closed one.
func PeerGone(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, syscall.EPIPE) // a write's word for it
}
