package spawn

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"unicode"
	"unsafe"

	"golang.org/x/sys/windows"

	"github.com/seed-86a41135/supervisor/internal/proc"
)

// Start resolves and starts req the Windows way (design §5):
//
//   - The command is found like cmd finds it: in PATH, trying each
//     extension of PATHEXT; a .cmd or .bat file is run through
//     `cmd.exe /d /e:ON /v:OFF /s /c "..."` (CreateProcess runs only
//     executables), its arguments escaped for cmd.
//   - The child is created inside its session's job and its own server job
//     (PROC_THREAD_ATTRIBUTE_JOB_LIST, Windows 10+): it is in them from its
//     first instruction, as a Linux child cloned into its cgroup is, so
//     nothing it starts can escape by being quick. Should the system refuse
//     the jobs, the child is started outside them (logged); the cascade then
//     finds its tree by markers.
//   - It leads a console process group of its own (CREATE_NEW_PROCESS_GROUP;
//     PGID = PID), so the cascade can send it CTRL_BREAK. That reaches it
//     only when it shares our console: a process without one (a detached
//     daemon) starts its servers with CREATE_NO_WINDOW, a hidden console of
//     their own, which no CTRL_BREAK of ours reaches; the cascade then
//     terminates them without the grace. (The cmd.exe running a batch file
//     answers CTRL_BREAK with "Terminate batch job (Y/N)?" once its child
//     has gone, and may wait for the answer: such a server ends by the
//     job's termination after its grace.)
//   - Only the three stdio handles are inherited (PROC_THREAD_ATTRIBUTE_
//     HANDLE_LIST): no server ever gets another server's pipe.
//
// Request.Pdeathsig has no Windows equivalent and is ignored: a local-mode
// shim is the only holder of its session job (its Instance is its own), so
// when the shim dies, however, the job's kill-on-close ends the server.
// Foreground and CgroupFD are refused (errors.ErrUnsupported).
func Start(r *Reaper, req Request) (Started, error) {
	defer func() {
		for _, f := range req.Stdio {
			if f != nil {
				f.Close()
			}
		}
	}()
	if len(req.Argv) == 0 {
		return Started{}, &StartError{Code: 125, Err: errors.New("empty argv")}
	}
	name := req.Argv[0]
	if req.CgroupFD != 0 {
		return Started{}, &StartError{Name: name, Code: 125, Err: fmt.Errorf("clone into a cgroup: %w", errors.ErrUnsupported)}
	}
	if req.Foreground {
		return Started{}, &StartError{Name: name, Code: 125,
			Err: fmt.Errorf("foreground process group: a Windows console has none: %w", errors.ErrUnsupported)}
	}
	if req.Sandbox != nil {
		return Started{}, &StartError{Name: name, Code: 125, Err: fmt.Errorf("start in a sandbox: %w", errors.ErrUnsupported)}
	}
	pathEnv, ok := envFold(req.Env, "PATH")
	if !ok {
		pathEnv = defaultPath()
	}
	pathExt, ok := envFold(req.Env, "PATHEXT")
	if !ok || strings.TrimSpace(pathExt) == "" {
		pathExt = defaultPathExt
	}
	if err := CheckDir(req.Dir); err != nil {
		return Started{}, &StartError{Name: name, Code: 125, Err: err}
	}
	path, err := resolveWindows(name, pathEnv, pathExt, req.Dir)
	if err != nil {
		return Started{}, err
	}
	app, line, err := commandLine(path, req.Argv)
	if err != nil {
		return Started{}, &StartError{Name: name, Code: 125, Err: err}
	}
	var stdio [3]windows.Handle
	for i, f := range req.Stdio {
		if f == nil {
			return Started{}, &StartError{Name: name, Code: 125, Err: fmt.Errorf("stdio handle %d missing", i)}
		}
		stdio[i] = windows.Handle(f.Fd())
	}
	env := dedupEnvFold(markedEnv(req))

	var tok proc.Token
	var tokErr error
	pid, exit, err := r.fork(&jobSpec{instance: req.Instance, session: req.SessionID, procID: req.ProcID},
		func(jobs []windows.Handle) (int, windows.Handle, bool, error) {
			if len(jobs) > 0 {
				pid, h, err := createProcess(app, line, env, req.Dir, stdio, jobs)
				if err == nil {
					return pid, h, true, nil
				}
				// The jobs may be what failed (a job of ours that refuses
				// nesting): try once without them, and say why if that works.
				pid, h, err2 := createProcess(app, line, env, req.Dir, stdio, nil)
				if err2 == nil {
					r.log.Warn("could not start inside job objects", "cmd", name, "err", err)
				}
				return pid, h, false, err2
			}
			pid, h, err := createProcess(app, line, env, req.Dir, stdio, nil)
			return pid, h, false, err
		},
		func(pid int, _ windows.Handle) error {
			// Read while our handle pins the process: the PID is its own.
			tok, tokErr = proc.TokenOf(pid)
			return tokErr
		})
	if tokErr != nil {
		return Started{}, &StartError{Name: name, Code: 125, Err: fmt.Errorf("read creation token of %d: %w", pid, tokErr)}
	}
	if err != nil {
		return Started{}, execError(name, req.Dir, err)
	}
	return Started{PID: pid, PGID: pid, Token: tok, Path: path, Exit: exit}, nil
}

// execError maps a CreateProcess failure to the code a shell would give.
func execError(name, dir string, err error) error {
	var errno windows.Errno
	if errors.As(err, &errno) {
		switch errno {
		case windows.ERROR_FILE_NOT_FOUND, windows.ERROR_PATH_NOT_FOUND:
			// Resolve found it: it went away since.
			return &StartError{Name: name, Code: CodeNotFound, Err: err}
		case windows.ERROR_DIRECTORY:
			return &StartError{Name: name, Code: 125, Err: fmt.Errorf("working directory %q: %w", dir, err)}
		case windows.ERROR_BAD_EXE_FORMAT, windows.ERROR_EXE_MARKED_INVALID, windows.ERROR_EXE_MACHINE_TYPE_MISMATCH,
			windows.ERROR_ACCESS_DENIED, windows.ERROR_ELEVATION_REQUIRED:
			return &StartError{Name: name, Code: CodeNotExecutable, Err: err}
		}
	}
	return &StartError{Name: name, Code: 125, Err: err}
}

// defaultPathExt is what cmd uses when PATHEXT is unset.
const defaultPathExt = ".COM;.EXE;.BAT;.CMD"

// defaultPath stands in for an unset PATH: the system directories, where
// CreateProcess itself would look.
func defaultPath() string {
	var dirs []string
	if d, err := windows.GetSystemDirectory(); err == nil {
		dirs = append(dirs, d)
	}
	if d, err := windows.GetWindowsDirectory(); err == nil {
		dirs = append(dirs, d)
	}
	return strings.Join(dirs, string(os.PathListSeparator))
}

// resolveWindows finds name the way cmd would, minus the current
// directory: a name with a path separator (or a drive) is taken relative
// to dir, any other is searched in each directory of pathEnv. In each
// place, a name with an extension is tried as it is, then the name with
// each extension of pathExt appended, in order ("npx" finds npx.cmd, not
// the extensionless shell script npm installs beside it).
//
// Unlike cmd (and libuv, which Node hosts spawn with), the working
// directory is not searched before PATH: an npx.cmd planted in a project
// must not win over the real one. Write .\name to mean the one there.
func resolveWindows(name, pathEnv, pathExt, dir string) (string, error) {
	if name == "" {
		return "", &StartError{Name: name, Code: CodeNotFound, Err: errors.New("empty command")}
	}
	var exts []string
	for _, e := range strings.Split(pathExt, ";") {
		e = strings.ToLower(strings.TrimSpace(e))
		if e == "" {
			continue
		}
		if !strings.HasPrefix(e, ".") {
			e = "." + e
		}
		exts = append(exts, e)
	}
	if strings.ContainsAny(name, `/\:`) {
		p := name
		if !filepath.IsAbs(p) && filepath.VolumeName(p) == "" {
			p = filepath.Join(dir, p)
		}
		found, err := findExecutable(p, exts)
		if err != nil {
			return "", classify(name, err)
		}
		return found, nil
	}
	var denied error
	for _, d := range filepath.SplitList(pathEnv) {
		if d == "" {
			continue // Windows ignores empty entries; "." must be written
		}
		if !filepath.IsAbs(d) {
			d = filepath.Join(dir, d)
		}
		found, err := findExecutable(filepath.Join(d, name), exts)
		if err == nil {
			return found, nil
		}
		if !errors.Is(err, fs.ErrNotExist) && denied == nil {
			denied = err
		}
	}
	if denied != nil {
		return "", &StartError{Name: name, Code: CodeNotExecutable, Err: denied}
	}
	return "", &StartError{Name: name, Code: CodeNotFound, Err: errors.New("not found in PATH with any extension of PATHEXT")}
}

// findExecutable tries p as it is (when it has an extension) and then p
// with each of exts appended. A directory is not executable; any regular
// file is a candidate (Windows has no execute bit: what cannot run fails
// at CreateProcess with ERROR_BAD_EXE_FORMAT, code 126).
func findExecutable(p string, exts []string) (string, error) {
	candidates := make([]string, 0, len(exts)+1)
	if filepath.Ext(p) != "" {
		candidates = append(candidates, p)
	}
	for _, e := range exts {
		candidates = append(candidates, p+e)
	}
	var first error
	for _, c := range candidates {
		st, err := os.Stat(c)
		if err == nil && !st.IsDir() {
			return c, nil
		}
		if err == nil {
			err = fmt.Errorf("%s is a directory", c)
		}
		if first == nil || errors.Is(first, fs.ErrNotExist) && !errors.Is(err, fs.ErrNotExist) {
			first = err
		}
	}
	if first == nil {
		first = &fs.PathError{Op: "stat", Path: p, Err: fs.ErrNotExist}
	}
	return "", first
}

// commandLine returns the program CreateProcess runs and its command line:
// path itself with argv composed by the rules of CommandLineToArgvW, or
// cmd.exe for a batch file.
func commandLine(path string, argv []string) (app, line string, err error) {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".bat", ".cmd":
		sys, err := windows.GetSystemDirectory()
		if err != nil {
			return "", "", fmt.Errorf("find cmd.exe: %w", err)
		}
		line, err := batchLine(path, argv[1:])
		if err != nil {
			return "", "", err
		}
		// cmd.exe from the system directory, not %ComSpec%: the caller's
		// environment does not get to pick the interpreter.
		return filepath.Join(sys, "cmd.exe"), line, nil
	}
	return path, windows.ComposeCommandLine(argv), nil
}

// batchLine builds the command line that makes cmd.exe run script with
// args, each reaching the script as one %N, literally (the BatBadBut
// class of injection: cmd parses the line again, and CommandLineToArgvW
// quoting does not protect against it). /s makes cmd strip exactly the
// outer pair of quotes; /v:OFF keeps !VAR! literal; /e:ON keeps the
// expansion trick for % below working; /d skips AutoRun commands from the
// registry. The escaping follows the one Rust's standard library uses for
// batch files since its fix for CVE-2024-24576.
func batchLine(script string, args []string) (string, error) {
	if strings.ContainsAny(script, "\"\r\n\x00") || strings.HasSuffix(script, `\`) {
		return "", fmt.Errorf("batch file path %q: a Windows file name has no quote, line break or trailing backslash", script)
	}
	var b strings.Builder
	b.WriteString(`cmd.exe /d /e:ON /v:OFF /s /c ""`)
	b.WriteString(script)
	b.WriteByte('"')
	for _, a := range args {
		b.WriteByte(' ')
		if err := appendBatchArg(&b, a); err != nil {
			return "", err
		}
	}
	b.WriteByte('"')
	return b.String(), nil
}

// appendBatchArg appends one argument for a batch file. It is quoted when
// it holds anything but letters, digits and a few inert characters (cmd
// does not interpret & | < > ^ ( ) inside quotes); a quote inside is
// doubled, the way cmd and %1 read one; backslashes before a quote or the
// closing quote are doubled, for programs the script passes %1 on to; and
// each % is followed by %cd:~,% — an expansion of the current directory cut
// to nothing — so that no %NAME% inside can expand, since cmd expands those
// even inside quotes and ^ cannot escape them there. A line break cannot be
// passed to a batch file at all.
func appendBatchArg(b *strings.Builder, a string) error {
	if strings.ContainsAny(a, "\r\n\x00") {
		return fmt.Errorf("argument %q: a batch file cannot receive a line break or NUL", a)
	}
	quote := a == "" || strings.HasSuffix(a, `\`)
	for _, c := range a {
		ascii := c <= unicode.MaxASCII
		inert := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
			strings.ContainsRune(`#$*+-./:?@\_`, c)
		if ascii && !inert || unicode.IsControl(c) {
			quote = true
			break
		}
	}
	if quote {
		b.WriteByte('"')
	}
	backslashes := 0
	for _, c := range a {
		switch c {
		case '\\':
			backslashes++
		case '"':
			b.WriteString(strings.Repeat(`\`, backslashes))
			b.WriteByte('"')
			backslashes = 0
		case '%':
			b.WriteString("%%cd:~,")
			backslashes = 0
		default:
			backslashes = 0
		}
		b.WriteRune(c)
	}
	if quote {
		b.WriteString(strings.Repeat(`\`, backslashes))
		b.WriteByte('"')
	}
	return nil
}

// procThreadAttributeJobList is PROC_THREAD_ATTRIBUTE_JOB_LIST
// (ProcThreadAttributeValue(13, FALSE, TRUE, FALSE)), which x/sys does not
// name.
const procThreadAttributeJobList = 0x0002000D

// createProcess starts app with the command line line, the environment
// env, in dir, with stdio as its standard handles (and no other handle),
// in its own console process group and, when jobs is not empty, inside
// those jobs in their order (the session's first: a job can only be nested
// under one the process is already in). It returns the PID and the process
// handle CreateProcess gave (all access), which the caller owns.
func createProcess(app, line string, env []string, dir string, stdio [3]windows.Handle, jobs []windows.Handle) (int, windows.Handle, error) {
	appp, err := windows.UTF16PtrFromString(app)
	if err != nil {
		return 0, 0, fmt.Errorf("program %q: %w", app, err)
	}
	// CreateProcessW may write to the command line: it must be a buffer
	// of our own.
	cmdline, err := windows.UTF16FromString(line)
	if err != nil {
		return 0, 0, fmt.Errorf("command line: %w", err)
	}
	var dirp *uint16
	if dir != "" {
		if dirp, err = windows.UTF16PtrFromString(dir); err != nil {
			return 0, 0, fmt.Errorf("working directory %q: %w", dir, err)
		}
	}
	block, err := envBlock(env)
	if err != nil {
		return 0, 0, err
	}

	// The child inherits only inheritable handles, and of those only the
	// ones the handle list names: make inheritable copies of the three
	// stdio handles, closed again once the child has its own. (Copies
	// live for this call only; everything this process starts names its
	// handles the same way, Go's syscall.StartProcess included.)
	self := windows.CurrentProcess()
	var inherit [3]windows.Handle
	for i, h := range stdio {
		if err := windows.DuplicateHandle(self, h, self, &inherit[i], 0, true, windows.DUPLICATE_SAME_ACCESS); err != nil {
			for _, d := range inherit[:i] {
				windows.CloseHandle(d)
			}
			return 0, 0, fmt.Errorf("duplicate stdio handle %d: %w", i, err)
		}
	}
	defer func() {
		for _, d := range inherit {
			windows.CloseHandle(d)
		}
	}()

	attrs, err := windows.NewProcThreadAttributeList(2)
	if err != nil {
		return 0, 0, fmt.Errorf("process attribute list: %w", err)
	}
	defer attrs.Delete()
	if err := attrs.Update(windows.PROC_THREAD_ATTRIBUTE_HANDLE_LIST, unsafe.Pointer(&inherit[0]),
		uintptr(len(inherit))*unsafe.Sizeof(inherit[0])); err != nil {
		return 0, 0, fmt.Errorf("process attribute: handle list: %w", err)
	}
	if len(jobs) > 0 {
		if err := attrs.Update(procThreadAttributeJobList, unsafe.Pointer(&jobs[0]),
			uintptr(len(jobs))*unsafe.Sizeof(jobs[0])); err != nil {
			return 0, 0, fmt.Errorf("process attribute: job list: %w", err)
		}
	}

	si := new(windows.StartupInfoEx)
	si.Cb = uint32(unsafe.Sizeof(*si))
	si.Flags = windows.STARTF_USESTDHANDLES
	si.StdInput, si.StdOutput, si.StdErr = inherit[0], inherit[1], inherit[2]
	si.ProcThreadAttributeList = attrs.List()

	flags := uint32(windows.CREATE_UNICODE_ENVIRONMENT | windows.EXTENDED_STARTUPINFO_PRESENT | windows.CREATE_NEW_PROCESS_GROUP)
	if !haveConsole() {
		// Else every console server would pop up a window of its own.
		flags |= windows.CREATE_NO_WINDOW
	}
	pi := new(windows.ProcessInformation)
	err = windows.CreateProcess(appp, &cmdline[0], nil, nil, true, flags, &block[0], dirp, &si.StartupInfo, pi)
	runtime.KeepAlive(cmdline)
	runtime.KeepAlive(block)
	runtime.KeepAlive(jobs)
	runtime.KeepAlive(si)
	if err != nil {
		return 0, 0, err
	}
	windows.CloseHandle(pi.Thread)
	return int(pi.ProcessId), pi.Process, nil
}

// envBlock encodes env as a Unicode environment block: KEY=VALUE strings,
// each ended by a NUL, the whole by one more.
func envBlock(env []string) ([]uint16, error) {
	var block []uint16
	for _, kv := range env {
		s, err := windows.UTF16FromString(kv)
		if err != nil {
			return nil, fmt.Errorf("environment entry %q: %w", kv, err)
		}
		block = append(block, s...) // s ends with its NUL
	}
	if len(block) == 0 {
		block = append(block, 0) // an empty block is two NULs
	}
	return append(block, 0), nil
}

// envKey splits a KEY=VALUE entry. The hidden per-drive entries
// ("=C:=C:\dir") start with '=': their name runs to the second one.
func envKey(kv string) (key, value string, ok bool) {
	if kv == "" {
		return "", "", false
	}
	i := strings.IndexByte(kv[1:], '=')
	if i < 0 {
		return "", "", false
	}
	return kv[:i+1], kv[i+2:], true
}

// envFold returns the value of key, compared as Windows compares
// environment names (case-insensitively: the variable is usually "Path").
// The last entry wins, as in dedupEnvFold.
func envFold(env []string, key string) (string, bool) {
	for i := len(env) - 1; i >= 0; i-- {
		if k, v, ok := envKey(env[i]); ok && strings.EqualFold(k, key) {
			return v, true
		}
	}
	return "", false
}

// dedupEnvFold drops entries whose name (case-insensitively) comes again
// later, so the last one wins, and sorts what is left by name, as
// CreateProcess documents for an environment block. WithMarkers replaces
// the markers by their exact names; an inherited "supervisor_proc_id"
// would otherwise shadow ours in a child that looks names up in order.
func dedupEnvFold(env []string) []string {
	seen := map[string]bool{}
	out := make([]string, 0, len(env))
	for i := len(env) - 1; i >= 0; i-- {
		k, _, ok := envKey(env[i])
		if !ok {
			continue // not an entry; CreateProcess would reject the block
		}
		k = strings.ToUpper(k)
		if seen[k] {
			continue
		}
		seen[k] = true
		out = append(out, env[i])
	}
	slices.SortFunc(out, func(a, b string) int {
		ka, _, _ := envKey(a)
		kb, _, _ := envKey(b)
		return strings.Compare(strings.ToUpper(ka), strings.ToUpper(kb))
	})
	return out
}

var procGetConsoleProcessList = modkernel32.NewProc("GetConsoleProcessList")

// haveConsole reports whether this process is attached to a console:
// GetConsoleProcessList fails without one.
func haveConsole() bool {
	if procGetConsoleProcessList.Find() != nil {
		return false
	}
	var pids [1]uint32
	n, _, _ := procGetConsoleProcessList.Call(uintptr(unsafe.Pointer(&pids[0])), uintptr(len(pids)))
	return n != 0
}
