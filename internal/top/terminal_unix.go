//go:build unix

package top

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	"golang.org/x/term"
)

// Interactive shows the live view, from first on, on the terminal in/out
// until q, Esc or Ctrl-C: the terminal in raw mode and on its alternate
// screen (both restored on the way out), refreshed every interval,
// re-sorted on a sort key. One loop waits on the keyboard, a snapshot
// being taken beside it: no reader is left behind.
func Interactive(in, out *os.File, first Snapshot, fetch Fetch, interval time.Duration, by string) error {
	fd := int(in.Fd())
	old, err := term.MakeRaw(fd)
	if err != nil {
		// Not a terminal that takes raw mode: the plain table instead.
		return fmt.Errorf("put the terminal in raw mode: %v: %w", err, ErrNoInteractive)
	}
	defer func() {
		if err := term.Restore(fd, old); err != nil {
			fmt.Fprintf(os.Stderr, "supervisor: the terminal could not be restored (%v): type `reset` to restore it\n", err)
		}
	}()
	fmt.Fprint(out, "\x1b[?1049h\x1b[?25l") // alternate screen, no cursor
	defer fmt.Fprint(out, "\x1b[?25h\x1b[?1049l")
	// A signal to end (kill, the terminal hanging up) ends the loop, so
	// the terminal is restored: raw mode sends no SIGINT of its own.
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGINT)
	defer signal.Stop(sigs)
	snap := first // the caller's, taken to fail early without a daemon
	var fetchErr error
	next := time.Now().Add(interval)
	buf := make([]byte, 64)
	dirty := true
	// A snapshot is taken beside the loop, which stays on the keys: a
	// daemon slow to answer never holds the view (fetch has a deadline,
	// and the goroutine ends with it).
	type fetched struct {
		snap Snapshot
		err  error
	}
	results := make(chan fetched, 1)
	inFlight := false
	for {
		if !inFlight && !time.Now().Before(next) {
			inFlight = true
			go func() {
				s, err := fetch()
				results <- fetched{s, err}
			}()
		}
		select {
		case f := <-results:
			snap, fetchErr, inFlight, dirty = f.snap, f.err, false, true
			next = time.Now().Add(interval)
		default:
		}
		if dirty {
			draw(out, snap, fetchErr, by)
			dirty = false
		}
		// Short waits, so a signal or a snapshot is seen within a fifth
		// of a second.
		wait := min(max(time.Until(next), 0), 200*time.Millisecond)
		if inFlight {
			wait = 50 * time.Millisecond
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		n, err := unix.Poll(fds, int(wait.Milliseconds())+1)
		if err != nil && !errors.Is(err, unix.EINTR) {
			return fmt.Errorf("wait for a key: %w", err)
		}
		select {
		case <-sigs:
			return nil
		default:
		}
		if n <= 0 || fds[0].Revents == 0 {
			continue
		}
		if fds[0].Revents&(unix.POLLHUP|unix.POLLERR|unix.POLLNVAL) != 0 {
			return nil // the terminal went away
		}
		k, err := in.Read(buf)
		if err != nil {
			return nil
		}
		quit, sort := key(buf[:k])
		if quit {
			return nil
		}
		if sort != "" && sort != by {
			by, dirty = sort, true
		}
	}
}

// key reads what one read from the keyboard says: quit (q, Ctrl-C, a lone
// Esc), or a sort key's name. An escape sequence (an arrow key) is
// neither.
func key(b []byte) (quit bool, sort string) {
	switch {
	case len(b) == 0:
		return false, ""
	case b[0] == 'q' || b[0] == 3 || len(b) == 1 && b[0] == 0x1b:
		return true, ""
	case b[0] == 0x1b:
		return false, ""
	}
	for _, k := range sortKeys {
		if string(b[:1]) == k.key {
			return false, k.name
		}
	}
	return false, ""
}

// draw renders the view from the top left of the screen, clearing what
// the last one left, in raw mode's line endings.
func draw(out *os.File, snap Snapshot, fetchErr error, by string) {
	w, h, err := term.GetSize(int(out.Fd()))
	if err != nil {
		w, h = 0, 0
	}
	var text string
	switch {
	case fetchErr != nil:
		text = "supervisor top: " + fetchErr.Error() + "\n(retrying; q quits)\n"
	case snap.At.IsZero():
		text = "supervisor top: asking the daemon...\n"
	default:
		text = Render(snap, by, w, h)
	}
	var b bytes.Buffer
	b.WriteString("\x1b[H\x1b[2J")
	b.WriteString(strings.ReplaceAll(strings.TrimRight(text, "\n"), "\n", "\r\n"))
	_, _ = out.Write(b.Bytes()) // the terminal: as fmt.Fprint's, unchecked
}
