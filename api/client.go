package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/seed-86a41135/supervisor/internal/proc"
)

// ErrNotRunning means no daemon answers on the socket.
var ErrNotRunning = errors.New("the supervisor daemon is not running")

// ErrOtherUser means the other end of a connection runs as another user:
// neither side talks to it (a run request carries the caller's whole
// environment, secrets included).
var ErrOtherUser = errors.New("the other end runs as another user")

// Client is a connection to the daemon after the hello handshake.
type Client struct {
	*Conn
	// Daemon is the daemon's hello.
	Daemon Hello
	own    *Hello // the hello this client sent
}

// Dial connects to the daemon at socket and exchanges hellos. A missing
// socket or a refused connection is reported as ErrNotRunning.
//
// A daemon at its connection cap answers with a retryable error: Dial
// retries with backoff until ctx is done (or for busyWait when ctx has no
// deadline), so a burst of clients is served, not refused.
func Dial(ctx context.Context, socket string) (*Client, error) {
	give := time.Now().Add(busyWait)
	if dl, ok := ctx.Deadline(); ok {
		give = dl
	}
	delay := 10 * time.Millisecond
	unanswered := 0
	for {
		c, err := dialOnce(ctx, socket)
		var e *Error
		retry := errors.As(err, &e) && e.Retry
		var u *unansweredError
		if errors.As(err, &u) && unanswered < maxUnanswered {
			unanswered++
			retry = true
		}
		if err == nil || !retry || time.Now().Add(delay).After(give) {
			return c, err
		}
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
		delay = min(2*delay, 500*time.Millisecond)
	}
}

// busyWait is how long Dial retries a busy daemon when its context sets
// no deadline.
const busyWait = 10 * time.Second

// maxUnanswered is how many connections in a row Dial lets the daemon
// close unanswered before it gives up (unansweredError).
const maxUnanswered = 3

// answerWait bounds the wait for the daemon's answer to a hello it did
// not read, should its end not be closed (see handshake).
var answerWait = time.Second

// unansweredError is a handshake that found the connection closed by the
// daemon with no answer to read. Nothing was asked of the daemon yet, so
// Dial tries again (a few times): a daemon at its connection cap whose
// answer was not written (see Daemon.refuseBusy) is the known cause.
type unansweredError struct{ err error }

func (e *unansweredError) Error() string { return e.err.Error() }
func (e *unansweredError) Unwrap() error { return e.err }

func dialOnce(ctx context.Context, socket string) (*Client, error) {
	conn, err := dial(ctx, socket)
	if err != nil {
		return nil, err
	}
	conn.SetLimits(MaxReply, MaxFrame)
	// The run request carries the caller's whole environment (secrets
	// included): never hand it to a daemon of another uid, e.g. one that
	// squats the /tmp fallback path.
	if _, err := conn.CheckPeer(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("connect %s: refusing to talk to it: %w", socket, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		conn.SetDeadline(dl)
	}
	c := &Client{Conn: conn}
	if err := c.handshake(); err != nil {
		conn.Close()
		return nil, fmt.Errorf("handshake with daemon at %s: %w", socket, err)
	}
	conn.SetDeadline(time.Time{})
	return c, nil
}

func (c *Client) handshake() error {
	c.own = NewHello()
	if err := c.Send(TypeHello, c.own); err != nil {
		// A daemon at its connection cap answers at once and closes
		// without reading the hello: the write fails (EPIPE on unix, a
		// broken pipe of another name on Windows), and its answer, a
		// retryable error, waits to be read, in full, since the daemon
		// closed. recvQueued reads it whatever the deadline: a read
		// bounded by a deadline set here is not even tried once this
		// goroutine is held off past it, and under a flood on a loaded
		// machine one was (the refusal lost, the broken pipe reported).
		// Only a peer whose end is still open (nothing queued yet) is
		// waited for, answerWait at most.
		m, fds, rerr := c.recvQueued()
		if errors.Is(rerr, syscall.EAGAIN) {
			c.SetDeadline(time.Now().Add(answerWait))
			m, fds, rerr = c.Recv()
		}
		if rerr == nil {
			CloseFds(fds)
			var e Error
			if m.Type == TypeError && Decode(m, &e) == nil {
				return &e
			}
		}
		if PeerGone(rerr) {
			return &unansweredError{err}
		}
		return err
	}
	m, fds, err := c.Recv()
	CloseFds(fds)
	if err != nil {
		if PeerGone(err) {
			// Closed without a word, the hello read or not.
			return &unansweredError{err}
		}
		return err
	}
	if m.Type == TypeError {
		var e Error
		if err := Decode(m, &e); err != nil {
			return err
		}
		return &e
	}
	if m.Type != TypeHello {
		return fmt.Errorf("%w: expected hello, got %q", ErrMalformed, m.Type)
	}
	if err := Decode(m, &c.Daemon); err != nil {
		return err
	}
	if c.Daemon.Protocol != Protocol {
		return fmt.Errorf("daemon speaks protocol %d (version %s), this supervisor %d (version %s): restart the daemon with `supervisor daemon stop` and retry",
			c.Daemon.Protocol, c.Daemon.Version, Protocol, Version)
	}
	return nil
}

// Call sends a request and decodes the single reply into resp (which may be
// nil for an ok reply). An error reply is returned as *Error.
func (c *Client) Call(typ string, req any, resp any) error {
	if err := c.Send(typ, req); err != nil {
		return err
	}
	return c.reply(typ, resp)
}

// reply reads the reply to a typ request into resp.
func (c *Client) reply(typ string, resp any) error {
	m, err := c.recvReply(typ)
	if err != nil {
		return err
	}
	return DecodeReply(m, resp)
}

// recvReply reads one frame answering a typ request.
func (c *Client) recvReply(typ string) (Msg, error) {
	m, fds, err := c.Recv()
	CloseFds(fds)
	if err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return Msg{}, fmt.Errorf("the daemon closed the connection before answering %s (did it exit? see supervisor.log in its state directory): %w", typ, err)
		}
		return Msg{}, fmt.Errorf("read reply to %s: %w", typ, err)
	}
	return m, nil
}

// DecodeReply turns an error message into *Error and decodes anything else
// into resp.
func DecodeReply(m Msg, resp any) error {
	if m.Type == TypeError {
		var e Error
		if err := Decode(m, &e); err != nil {
			return err
		}
		return &e
	}
	if resp == nil {
		return nil
	}
	return Decode(m, resp)
}

// NewHello is this process's hello.
func NewHello() *Hello {
	pidNS, mntNS := proc.Namespaces()
	return &Hello{Protocol: Protocol, Version: Version, PID: os.Getpid(), PidNS: pidNS, MntNS: mntNS}
}

// SameNamespaces reports whether the daemon runs in this process's PID and
// mount namespaces (unknown counts as the same).
func (c *Client) SameNamespaces() bool {
	differ := func(a, b uint64) bool { return a != 0 && b != 0 && a != b }
	return !differ(c.own.PidNS, c.Daemon.PidNS) && !differ(c.own.MntNS, c.Daemon.MntNS)
}

// Processes lists processes (the ps request), reading every page the
// daemon sends.
func (c *Client) Processes(req PsRequest) ([]Process, error) {
	if err := c.Send(TypePs, &req); err != nil {
		return nil, err
	}
	out := []Process{}
	for {
		var page Processes
		if err := c.reply(TypePs, &page); err != nil {
			return nil, err
		}
		out = append(out, page.Processes...)
		if !page.More {
			return out, nil
		}
	}
}

// ProcessesJSON is Processes as the daemon's JSON array, undecoded: a
// listing printed as JSON need not be decoded and encoded again (at
// thousands of records that was most of `ps --json`'s time).
func (c *Client) ProcessesJSON(req PsRequest) (json.RawMessage, error) {
	if err := c.Send(TypePs, &req); err != nil {
		return nil, err
	}
	out := []byte{'['}
	for {
		m, err := c.recvReply(TypePs)
		if err != nil {
			return nil, err
		}
		page, ok := processesPage(m)
		if !ok {
			if err := DecodeReply(m, &page); err != nil {
				return nil, err
			}
		}
		items := bytes.TrimSpace(page.Processes)
		if len(items) < 2 || items[0] != '[' || items[len(items)-1] != ']' {
			if !bytes.Equal(items, []byte("null")) {
				return nil, fmt.Errorf("%w: processes is not a JSON array", ErrMalformed)
			}
			items = []byte("[]")
		}
		if inner := bytes.TrimSpace(items[1 : len(items)-1]); len(inner) > 0 {
			if len(out) > 1 {
				out = append(out, ',')
			}
			out = append(out, inner...)
		}
		if !page.More {
			return append(out, ']'), nil
		}
	}
}

// rawPage is a processes frame with its records undecoded.
type rawPage struct {
	Processes json.RawMessage `json:"processes"`
	More      bool            `json:"more"`
}

// processesPage takes the records out of a processes frame as this
// daemon's encoder writes it ({"processes":[…]} or {"processes":[…],
// "more":true}) without a second scan: the frame's JSON was checked as it
// was read. Anything else is left to the decoder.
func processesPage(m Msg) (rawPage, bool) {
	const prefix, more = `{"processes":`, `,"more":true}`
	b := []byte(m.Body)
	if m.Type != TypeProcesses || len(b) < len(prefix)+3 || !bytes.HasPrefix(b, []byte(prefix)) {
		return rawPage{}, false
	}
	items, isMore := b[len(prefix):len(b)-1], false // up to the closing brace
	if len(b) >= len(prefix)+len(more)+2 && bytes.HasSuffix(b, []byte(more)) {
		items, isMore = b[len(prefix):len(b)-len(more)], true
	}
	if b[len(b)-1] != '}' || !oneArray(items) {
		return rawPage{}, false
	}
	return rawPage{Processes: items, More: isMore}, true
}

// oneArray says whether b, valid JSON in its frame, is a single array: its
// opening bracket closes at its last byte (a body with another member
// after "processes" would otherwise pass for records). One pass, strings
// skipped.
func oneArray(b []byte) bool {
	if len(b) < 2 || b[0] != '[' {
		return false
	}
	depth, inString := 0, false
	for i := 0; i < len(b); i++ {
		c := b[i]
		switch {
		case inString:
			if c == '\\' {
				i++
			} else if c == '"' {
				inString = false
			}
		case c == '"':
			inString = true
		case c == '[' || c == '{':
			depth++
		case c == ']' || c == '}':
			depth--
			if depth == 0 {
				return i == len(b)-1
			}
		}
	}
	return false
}

// CallProgress is Call for a request that asked for progress frames
// (TypeProgress): each one before the reply goes to progress.
func (c *Client) CallProgress(typ string, req any, resp any, progress func(Progress)) error {
	if err := c.Send(typ, req); err != nil {
		return err
	}
	for {
		m, err := c.recvReply(typ)
		if err != nil {
			return err
		}
		if m.Type != TypeProgress {
			return DecodeReply(m, resp)
		}
		var p Progress
		if err := Decode(m, &p); err == nil && progress != nil {
			progress(p)
		}
	}
}
