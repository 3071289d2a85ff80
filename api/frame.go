package api

import (
	"encoding/json"
	"errors"
	"fmt"
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
