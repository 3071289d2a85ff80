package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/seed-86a41135/supervisor/api"
	"github.com/seed-86a41135/supervisor/internal/daemon"
)

// logsOptions are the flags of `supervisor logs`.
type logsOptions struct {
	follow     bool
	lines      int
	sessionID  string
	timestamps bool
	since      time.Duration
	// now is the clock: the times --timestamps prints and --since's cutoff.
	now func() time.Time
}

// logPoll is how often a followed log is looked at: a log file gives no
// event on append that works across rotation and every filesystem.
const logPoll = 200 * time.Millisecond

// stampLayout is a line's time under --timestamps: local, as `events`
// prints times, to the millisecond (a poll is 200 ms).
//
// Why the time a line was read, and none for a line already there: the log
// writer (logwriter.Copy, the hub) copies a server's bytes as they come,
// with no time of its own, so no line has a write time to show. A file's
// modification time is that of its last write only: given to every line
// of the file, it would date hours of output to its last line. A line read
// while following was written at most one poll before (on a loaded
// machine, a little more), which is a time that can be stated honestly.
const stampLayout = "2006-01-02T15:04:05.000Z07:00"

func newLogsCommand() *cobra.Command {
	o := logsOptions{now: time.Now}
	cmd := &cobra.Command{
		Use:   "logs [ID|NAME] [-f] [--lines|--tail N] [--since D] [--timestamps] [--session S]",
		Short: "Show the captured output of a server, or of every server (a shared server's output, a stdio server's stderr)",
		Long: `With ID|NAME, the captured output of that server. Without, that of every server
with a log under <state>/logs, each line prefixed with the server's name and id
(NAME@ID | line; NAME:PORT for a shared server whose id no daemon knows), the
servers in the order they last wrote. With -f and no name, the logs of servers
that start writing meanwhile are followed too, until interrupted.

A server that has written nothing yet has no log: it prints nothing (-f waits
for its first line). --lines (alias --tail) counts per server.

Log files are plain text: a line carries no time of its own. --timestamps
prints, before each line read while following (-f), the time it was read (logs
are polled every 0.2 s); a line that was already in the log gets "-" instead,
as its time is not known.

--since D leaves out each log file (live or rotated) last written more than D
ago, since every line in it is older. A file written since is printed with all
its lines, older ones included (up to --lines). Lines read while following
are always new, so always printed.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if o.lines < 0 {
				flag := "--lines"
				if cmd.Flags().Changed("tail") {
					flag = "--tail"
				}
				return fmt.Errorf("%s %d: must not be negative", flag, o.lines)
			}
			if o.since < 0 {
				return fmt.Errorf("--since %v: must not be negative", o.since)
			}
			if len(args) == 0 && o.sessionID != "" {
				return &usageError{hintError{err: errors.New("--session needs a server's ID|NAME"),
					hint: "see `supervisor ps --session S` for its servers"}}
			}
			p, err := paths()
			if err != nil {
				return err
			}
			ctx := context.Background()
			if o.follow {
				var stop context.CancelFunc
				ctx, stop = signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
				defer stop()
			}
			if len(args) == 0 {
				return o.all(ctx, cmd.OutOrStdout(), p)
			}
			path, err := findLog(p, args[0], o.sessionID)
			if err != nil {
				return err
			}
			return o.one(ctx, cmd.OutOrStdout(), path)
		},
	}
	cmd.Flags().BoolVarP(&o.follow, "follow", "f", false, "keep printing what is appended (across rotations); without a name, also the logs that appear")
	cmd.Flags().IntVar(&o.lines, "lines", 50, "how many of the last lines to print first, per server (0: all that is kept)")
	cmd.Flags().IntVar(&o.lines, "tail", 50, "the same as --lines")
	cmd.Flags().StringVar(&o.sessionID, "session", "", "only the server of this session (a name runs in many)")
	cmd.Flags().BoolVarP(&o.timestamps, "timestamps", "t", false, `prefix each line read while following with the time it was read; lines already in the log have no known time and get "-"`)
	cmd.Flags().DurationVar(&o.since, "since", 0, "leave out log files last written more than this long ago (e.g. 10m, 2h); a file written since is printed whole")
	return cmd
}

// cutoff is the time --since leaves out files last written before (zero:
// none).
func (o *logsOptions) cutoff() time.Time {
	if o.since == 0 {
		return time.Time{}
	}
	return o.now().Add(-o.since)
}

// one prints the tail of the log at path and, with -f, what is appended
// to it. A log that does not exist yet is its server's empty output.
func (o *logsOptions) one(ctx context.Context, w io.Writer, path string) error {
	emit := func(p []byte, _ time.Time) { _, _ = w.Write(p) } // the terminal: as fmt.Fprintf's, unchecked
	var lw *lineWriter
	if o.timestamps {
		lw = newLineWriter(w, "", nil, true, o.now)
		emit = lw.write
	}
	fl := &logFollower{path: path, emit: emit, now: o.now}
	defer fl.close()
	f, err := os.Open(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		// Nothing written yet: the log writer creates the file with the
		// first line. -f opens it once it is there.
	case err != nil:
		return err
	default:
		data, off, err := tailData(path, f, o.lines, o.cutoff())
		if err != nil {
			f.Close()
			return err
		}
		fl.f, fl.off = f, off
		emit(data, time.Time{}) // already there: written at a time not known
	}
	if o.follow {
		pollUntil(ctx, fl.poll)
	}
	if lw != nil {
		lw.flush()
	}
	return nil
}

// all prints the tail of every server's log, each line labelled with its
// server, and with -f follows them all, with the logs that appear
// meanwhile. One loop polls every log in turn: the lines of two servers
// never interleave within a line, and there is no goroutine to stop.
func (o *logsOptions) all(ctx context.Context, w io.Writer, p api.Paths) error {
	type source struct {
		fl *logFollower
		lw *lineWriter
	}
	var srcs []source
	seen := map[string]bool{}
	width := new(int) // of the longest label yet: later lines align to it
	cutoff := o.cutoff()
	// add starts reading the logs at paths: from their tails when they
	// were there when `logs` started, else from their starts (all they
	// hold was written since).
	add := func(paths []string, tail bool) error {
		ids := sharedLogIDs(p, paths)
		labels := make([]string, len(paths))
		for i, path := range paths {
			labels[i] = logLabel(p, path, ids)
			*width = max(*width, len(labels[i])) // before the first line is printed
		}
		for i, path := range paths {
			lw := newLineWriter(w, labels[i], width, o.timestamps, o.now)
			fl := &logFollower{path: path, emit: lw.write, now: o.now}
			f, err := os.Open(path)
			if errors.Is(err, os.ErrNotExist) {
				continue // gone (pruned with its record) since it was listed
			}
			if err != nil {
				return err
			}
			fl.f = f
			if tail {
				data, off, err := tailData(path, f, o.lines, cutoff)
				if err != nil {
					f.Close()
					return err
				}
				fl.off = off
				lw.write(data, time.Time{})
				if !o.follow {
					lw.flush() // its last line, unended, before the next server's
				}
			}
			seen[path] = true
			srcs = append(srcs, source{fl, lw})
		}
		return nil
	}
	defer func() {
		for _, s := range srcs {
			s.lw.flush()
			s.fl.close()
		}
	}()
	if err := add(serverLogs(p, nil), true); err != nil {
		return err
	}
	if !o.follow {
		return nil
	}
	pollUntil(ctx, func() {
		for _, s := range srcs {
			s.fl.poll()
		}
		if added := serverLogs(p, seen); len(added) > 0 {
			before := len(srcs)
			_ = add(added, false) // one that cannot be opened now is tried at the next poll
			for _, s := range srcs[before:] {
				s.fl.poll()
			}
		}
	})
	return nil
}

// pollUntil calls poll every logPoll until ctx ends, and once more then:
// what was written before the interrupt is printed.
func pollUntil(ctx context.Context, poll func()) {
	for {
		poll()
		select {
		case <-ctx.Done():
			poll()
			return
		case <-time.After(logPoll):
		}
	}
}

// serverLogs lists the live log files of all servers not in skip, the
// shared servers' (<state>/logs/NAME-PORT.log) and the stdio servers'
// (<state>/logs/run/NAME@ID.log), least recently written first: the
// latest output ends up next to the prompt.
func serverLogs(p api.Paths, skip map[string]bool) []string {
	dir := filepath.Join(p.StateDir, "logs")
	shared, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	run, _ := filepath.Glob(filepath.Join(dir, "run", "*.log"))
	all := slices.DeleteFunc(append(shared, run...), func(path string) bool { return skip[path] })
	mtime := map[string]time.Time{}
	for _, path := range all {
		if st, err := os.Stat(path); err == nil {
			mtime[path] = st.ModTime()
		}
	}
	slices.SortStableFunc(all, func(a, b string) int { return mtime[a].Compare(mtime[b]) })
	return all
}

// sharedLogIDs asks the daemon, if one runs, which process writes each
// shared server's log among paths (a stdio server's log is named by its
// id): the running one, else the one started last.
func sharedLogIDs(p api.Paths, paths []string) map[string]string {
	ids := map[string]string{}
	if !slices.ContainsFunc(paths, func(path string) bool { return filepath.Dir(path) == filepath.Join(p.StateDir, "logs") }) {
		return ids // no dial for nothing
	}
	c, err := dial()
	if err != nil {
		return ids
	}
	defer c.Close()
	procs, err := c.Processes(api.PsRequest{All: true})
	if err != nil {
		return ids
	}
	best := map[string]api.Process{}
	for _, pr := range procs {
		if !pr.Shared || pr.Port == 0 {
			continue
		}
		path := daemon.LogPath(p, pr.Name, pr.Port)
		if b, ok := best[path]; !ok || !pr.State.Final() && b.State.Final() ||
			pr.State.Final() == b.State.Final() && pr.StartedAt.After(b.StartedAt) {
			best[path] = pr
		}
	}
	for path, pr := range best {
		ids[path] = pr.ID
	}
	return ids
}

// logLabel names the server whose log is at path, for the prefix of its
// lines: NAME@ID, or NAME:PORT for a shared server's log no daemon knows
// the id of. The names in log file names are escaped (daemon's safeName):
// they are unescaped, then cleaned of control characters for the terminal.
func logLabel(p api.Paths, path string, ids map[string]string) string {
	stem := strings.TrimSuffix(filepath.Base(path), ".log")
	unescape := func(s string) string {
		if u, err := url.PathUnescape(s); err == nil {
			return u
		}
		return s
	}
	if filepath.Dir(path) == filepath.Join(p.StateDir, "logs", "run") {
		name, id, _ := strings.Cut(stem, "@") // an @ in a name is escaped
		return clean(unescape(name) + "@" + id)
	}
	i := strings.LastIndexByte(stem, '-') // a name may hold dashes, a port not
	if i < 0 {
		return clean(unescape(stem))
	}
	name, port := unescape(stem[:i]), stem[i+1:]
	if id, ok := ids[path]; ok {
		return clean(name + "@" + id)
	}
	return clean(name + ":" + port)
}

// lineWriter writes one log's output line by line, each line prefixed with
// the log's label (padded to *width) and, with stamps, the time it was
// read. A partial line waits for its end, so that lines of several logs
// written to one output never mix; its time is that of its first byte.
type lineWriter struct {
	w          io.Writer
	label      string
	width      *int
	stamps     bool
	stampWidth int
	partial    []byte
	partialAt  time.Time
}

func newLineWriter(w io.Writer, label string, width *int, stamps bool, now func() time.Time) *lineWriter {
	return &lineWriter{w: w, label: label, width: width, stamps: stamps, stampWidth: len(now().Format(stampLayout))}
}

// write writes the complete lines of p, read at the time read (zero: it
// was in the log already, written at a time not known).
func (lw *lineWriter) write(p []byte, read time.Time) {
	var out []byte
	for len(p) > 0 {
		if len(lw.partial) == 0 {
			lw.partialAt = read
		}
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			lw.partial = append(lw.partial, p...)
			break
		}
		out = lw.appendLine(out, p[:i+1])
		p = p[i+1:]
	}
	if len(out) > 0 {
		_, _ = lw.w.Write(out) // the terminal: as fmt.Fprintf's, unchecked
	}
}

// appendLine appends the prefixed pending partial line and rest, its end.
func (lw *lineWriter) appendLine(out, rest []byte) []byte {
	if lw.label != "" {
		width := len(lw.label)
		if lw.width != nil {
			width = *lw.width
		}
		out = fmt.Appendf(out, "%-*s | ", width, lw.label)
	}
	if lw.stamps {
		if lw.partialAt.IsZero() {
			out = fmt.Appendf(out, "%-*s ", lw.stampWidth, "-")
		} else {
			out = append(lw.partialAt.AppendFormat(out, stampLayout), ' ')
		}
	}
	out = append(append(out, lw.partial...), rest...)
	lw.partial = lw.partial[:0]
	return out
}

// flush writes a pending partial line, ended: the output is over.
func (lw *lineWriter) flush() {
	if len(lw.partial) > 0 {
		_, _ = lw.w.Write(lw.appendLine(nil, []byte("\n"))) // the terminal, as above
	}
}

// findLog finds the log of the server named (or with id) arg: the
// registry knows its kind, name, port and id (its log's name); without a
// daemon, the log files themselves do. Of several servers of one name, a
// running one is meant, else the one started last.
func findLog(p api.Paths, arg, sessionID string) (string, error) {
	type cand struct {
		path    string
		running bool
		started time.Time
	}
	var cands []cand
	if c, err := dial(); err == nil {
		if procs, err := c.Processes(api.PsRequest{All: true}); err == nil {
			for _, pr := range procs {
				if pr.ID != arg && pr.Name != arg || sessionID != "" && pr.Session != sessionID {
					continue
				}
				path := daemon.RunLogPath(p, pr.Name, pr.ID)
				if pr.Shared {
					path = daemon.LogPath(p, pr.Name, pr.Port)
				}
				if !slices.ContainsFunc(cands, func(c cand) bool { return c.path == path }) {
					cands = append(cands, cand{path, !pr.State.Final(), pr.StartedAt})
				}
			}
		}
		c.Close()
	}
	if len(cands) == 0 && sessionID == "" {
		for _, path := range daemon.LogPathsByName(p, arg) {
			cands = append(cands, cand{path: path})
		}
		if runLogs := daemon.RunLogPathsByName(p, arg); len(runLogs) > 0 {
			cands = append(cands, cand{path: runLogs[0]}) // the one written last
		}
	}
	if running := slices.DeleteFunc(slices.Clone(cands), func(c cand) bool { return !c.running }); len(running) > 0 {
		cands = running
	} else if len(cands) > 1 && !cands[0].started.IsZero() {
		newest := slices.MaxFunc(cands, func(a, b cand) int { return a.started.Compare(b.started) })
		cands = []cand{newest}
	}
	switch {
	case len(cands) == 0:
		return "", &hintError{err: fmt.Errorf("no captured output for %q in %s", arg, clean(filepath.Join(p.StateDir, "logs"))),
			hint: "see `supervisor ps --all` for the servers' names and ids"}
	case len(cands) > 1:
		paths := make([]string, len(cands))
		for i, c := range cands {
			paths[i] = c.path
		}
		return "", fmt.Errorf("%q names logs of several servers (%s); use a process id from `supervisor ps --all` or --session",
			arg, clean(strings.Join(paths, ", ")))
	}
	return cands[0].path, nil
}

// printTail prints the last n lines of the log at path, open as f (all
// that is kept when n is 0). It returns the offset it read f to.
func printTail(w io.Writer, path string, f *os.File, n int) (int64, error) {
	data, off, err := tailData(path, f, n, time.Time{})
	if err != nil {
		return 0, err
	}
	_, err = w.Write(data)
	return off, err
}

// tailData reads the last n lines of the log at path, open as f (all that
// is kept when n is 0): from f, and from its rotated files (path.1 the
// newest) for what f does not hold. It returns them with the offset it
// read f to.
//
// A file last modified before cutoff (when not zero) is left out, and so
// are the older backups after it: a file's modification time is that of
// its last write (a rename keeps it, the daemon's copy-truncate rotation
// only makes it later), so every line in such a file is older than cutoff.
// The lines carry no time, so a file written after cutoff is taken whole.
func tailData(path string, f *os.File, n int, cutoff time.Time) ([]byte, int64, error) {
	data, err := io.ReadAll(f)
	if err != nil {
		return nil, 0, err
	}
	read := int64(len(data))
	// Stat after the read: a write in between makes the file newer, never
	// an old file's lines pass for new ones.
	if st, err := f.Stat(); err == nil && st.ModTime().Before(cutoff) {
		return nil, read, nil
	}
	for i := 1; n == 0 || bytes.Count(data, []byte("\n")) <= n; i++ {
		older, ok := readBackup(fmt.Sprintf("%s.%d", path, i), cutoff)
		if !ok {
			break // no more backups (a gap in their numbers ends them too), or older than cutoff
		}
		data = append(older, data...)
	}
	start := 0
	if n > 0 {
		end := len(data)
		if end > 0 && data[end-1] == '\n' {
			end--
		}
		for i, seen := end-1, 0; i >= 0; i-- {
			if data[i] == '\n' {
				seen++
				if seen == n {
					start = i + 1
					break
				}
			}
		}
	}
	return data[start:], read, nil
}

// readBackup reads the rotated log at path unless it was last written
// before cutoff. Through one open file: a rotation meanwhile renames it,
// and its time and content must be of the same file.
func readBackup(path string, cutoff time.Time) ([]byte, bool) {
	f, err := os.Open(path)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || st.ModTime().Before(cutoff) {
		return nil, false
	}
	data, err := io.ReadAll(f)
	return data, err == nil
}

// logFollower reads a log on as it is appended to, across rotations: when
// the log writer renames the file to NAME.log.1 (and on, possibly several
// times between two looks), the rest of the old file is read through its
// open fd, then the files that came after it, oldest first, then the new
// one from its start. When the daemon copies a log to NAME.log.1 and
// truncates it (a server writing its log itself), a file shorter than
// what was read is read again from its start. A log that does not exist
// yet (f nil) is read from its start once it does.
type logFollower struct {
	path string
	f    *os.File
	off  int64
	// emit gets what was read, with the time it was read.
	emit func(p []byte, read time.Time)
	now  func() time.Time
	buf  []byte
}

// poll reads all there is to read now.
func (fl *logFollower) poll() {
	if fl.f == nil {
		f, err := os.Open(fl.path)
		if err != nil {
			return
		}
		fl.f, fl.off = f, 0
	}
	for {
		fl.drain()
		st, err := os.Stat(fl.path)
		if err != nil {
			return
		}
		cur, _ := fl.f.Stat()
		switch {
		case !os.SameFile(st, cur):
			// Renamed away: its writer has moved on, so what the old
			// file has now is all it gets.
			if newer := newerLogs(fl.path, cur); len(newer) > 0 {
				fl.drain()
				for _, nf := range newer {
					fl.f.Close()
					fl.f, fl.off = nf, 0
					fl.drain()
				}
				continue
			}
		case st.Size() < fl.off:
			fl.off = 0
			continue
		}
		return
	}
}

func (fl *logFollower) drain() {
	if fl.buf == nil {
		fl.buf = make([]byte, 64<<10)
	}
	for {
		n, err := fl.f.ReadAt(fl.buf, fl.off)
		if n > 0 {
			fl.emit(fl.buf[:n], fl.now())
			fl.off += int64(n)
		}
		if err != nil || n == 0 {
			return
		}
	}
}

func (fl *logFollower) close() {
	if fl.f != nil {
		fl.f.Close()
		fl.f = nil
	}
}

// newerLogs opens the files of the log at path that are newer than old
// (renamed to a backup), oldest first, ending with the live one. They are
// opened newest first: a rotation meanwhile moves files to higher numbers,
// so one may be met twice (and is skipped) but none is missed.
func newerLogs(path string, old os.FileInfo) []*os.File {
	var out []*os.File
	var infos []os.FileInfo
	for i := 0; ; i++ {
		p := path
		if i > 0 {
			p = fmt.Sprintf("%s.%d", path, i)
		}
		nf, err := os.Open(p)
		if err != nil {
			break // past the last backup: old was dropped, all are newer
		}
		st, err := nf.Stat()
		if err != nil || os.SameFile(st, old) {
			nf.Close()
			break
		}
		if slices.ContainsFunc(infos, func(fi os.FileInfo) bool { return os.SameFile(fi, st) }) {
			nf.Close()
			continue
		}
		out, infos = append(out, nf), append(infos, st)
	}
	slices.Reverse(out)
	return out
}
