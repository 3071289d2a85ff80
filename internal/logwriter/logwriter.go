// Package logwriter copies a server's output stream into a size-capped log
// file, rotating it by rename before a write would pass the cap.
//
// Unlike copy-and-truncate rotation of a file the server writes itself,
// the writer is the only one writing the file: it knows the size before
// every write, so the live file never passes the cap, and a rename loses
// nothing. Only what falls off the end of the kept backups is dropped.
//
// # Caveats
//
// A line longer than the cap is split across files. Two writers of one
// file (an old server's leftover descendants still holding its pipe after
// a restart) each count their own size.
package logwriter

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
)

// Options say where the log goes and how much of it is kept.
type Options struct {
	// Path is the live log file; backups are Path.1 (the newest) to
	// Path.Keep.
	Path string
	// MaxBytes is the cap of each file; zero or less means no cap.
	MaxBytes int64
	// Keep is how many rotated files are kept; 0 keeps the live one only.
	Keep int
	// Tee, when not nil, gets a copy of everything read (a host's stderr).
	// Once a write to it fails (the host went away) it is dropped and the
	// log goes on.
	Tee io.Writer
}

// bufSize is one read: the most the stream is ahead of the log.
const bufSize = 64 << 10

// Copy copies in to the log until in reaches EOF, then returns nil. A
// failed write to the log drops that data (the stream keeps being read, so
// its writer never blocks on a full pipe) and Copy returns the first such
// error at the end.
func Copy(in io.Reader, opt Options) error {
	w := &writer{opt: opt}
	defer w.close()
	buf := make([]byte, bufSize)
	var firstErr error
	for {
		n, rerr := in.Read(buf)
		if n > 0 {
			if opt.Tee != nil {
				if _, err := opt.Tee.Write(buf[:n]); err != nil {
					opt.Tee = nil
				}
			}
			if err := w.write(buf[:n]); err != nil && firstErr == nil {
				firstErr = err
			}
		}
		if errors.Is(rerr, io.EOF) {
			return firstErr
		}
		if rerr != nil {
			if firstErr == nil {
				firstErr = fmt.Errorf("read the output: %w", rerr)
			}
			return firstErr
		}
	}
}

type writer struct {
	opt  Options
	f    *os.File
	size int64
}

func (w *writer) open() error {
	f, err := os.OpenFile(w.opt.Path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("open log %s: %w", w.opt.Path, err)
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("stat log %s: %w", w.opt.Path, err)
	}
	w.f, w.size = f, st.Size()
	return nil
}

func (w *writer) close() {
	if w.f != nil {
		w.f.Close()
		w.f = nil
	}
}

// write appends p, rotating first whenever the next piece would pass the
// cap. Pieces end at a line end where one fits, so a line is not split
// between two files unless it is longer than the cap.
func (w *writer) write(p []byte) error {
	for len(p) > 0 {
		if w.f == nil {
			if err := w.open(); err != nil {
				return err
			}
		}
		limit := w.opt.MaxBytes
		if limit <= 0 || w.size+int64(len(p)) <= limit {
			return w.append(p)
		}
		room := max(0, limit-w.size)
		cut := bytes.LastIndexByte(p[:room], '\n') + 1
		if cut == 0 {
			if w.size > 0 {
				if err := w.rotate(); err != nil {
					return err
				}
				continue
			}
			cut = int(room) // one line longer than the whole cap
		}
		if err := w.append(p[:cut]); err != nil {
			return err
		}
		p = p[cut:]
		if err := w.rotate(); err != nil {
			return err
		}
	}
	return nil
}

func (w *writer) append(p []byte) error {
	n, err := w.f.Write(p)
	w.size += int64(n)
	if err != nil {
		return fmt.Errorf("write log %s: %w", w.opt.Path, err)
	}
	return nil
}

// rotate renames the live file to Path.1 (older ones move up, the one
// past Keep goes) and starts a new live file. Renames,
// not copies: the writer alone has the file open, so nothing is lost.
func (w *writer) rotate() error {
	w.close()
	path := w.opt.Path
	if w.opt.Keep <= 0 {
		if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("rotate log %s: %w", path, err)
		}
		return w.open()
	}
	if err := os.Remove(Backup(path, w.opt.Keep)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("rotate log %s: %w", path, err)
	}
	for i := w.opt.Keep - 1; i >= 1; i-- {
		if err := os.Rename(Backup(path, i), Backup(path, i+1)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("rotate log %s: %w", path, err)
		}
	}
	if err := os.Rename(path, Backup(path, 1)); err != nil {
		return fmt.Errorf("rotate log %s: %w", path, err)
	}
	// The new file at once, not at the next write: readers find a live
	// log (empty) rather than none.
	return w.open()
}

// Backup is the name of path's i-th rotated file (1 the newest).
func Backup(path string, i int) string { return fmt.Sprintf("%s.%d", path, i) }
