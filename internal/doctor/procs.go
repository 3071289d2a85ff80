package doctor

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/seed-86a41135/supervisor/internal/proc"
	"github.com/seed-86a41135/supervisor/session"
	"github.com/seed-86a41135/supervisor/shutdown"
	"github.com/seed-86a41135/supervisor/spawn"
)

// notServers are programs whose argv may name an MCP thing without being
// a server: editors, pagers, searches, version control, terminal
// multiplexers (a tmux server whose session is called "mcp" lives on under
// PID 1 by design). Leaving them out costs a missed report at worst; the
// other way round, Fix would stop somebody's editor.
var notServers = map[string]bool{
	"vi": true, "vim": true, "nvim": true, "nano": true, "emacs": true, "less": true, "more": true,
	"cat": true, "tail": true, "head": true, "grep": true, "rg": true, "git": true, "man": true,
	"tmux": true, "screen": true,
}

// LooksLikeMCP reports whether argv looks like an MCP server: any element
// naming "mcp" or "modelcontextprotocol", case-insensitively, which covers
// `npx -y @modelcontextprotocol/server-filesystem`, `uvx mcp-server-git`,
// `node .../mcp/index.js`, `python -m some_mcp` and `supervisor _fixture
// mcp`, unless the program is one of notServers. It decides what the
// audit reports; what Fix may stop is the stricter ProvablyMCP's.
func LooksLikeMCP(argv []string) bool {
	if len(argv) == 0 || notServers[filepath.Base(argv[0])] {
		return false
	}
	for _, a := range argv {
		l := strings.ToLower(a)
		if strings.Contains(l, "mcp") || strings.Contains(l, "modelcontextprotocol") {
			return true
		}
	}
	return false
}

// reapers are what orphans are re-parented to, besides PID 1.
var reapers = map[string]bool{
	"systemd": true, "init": true, "tini": true, "dumb-init": true, "docker-init": true, "catatonit": true,
}

// ownCommandTicks: a process started within this many clock ticks (USER_HZ,
// 100 on every Linux architecture) of its reaper is the reaper's own
// command — a container's entrypoint under tini — not a leftover.
const ownCommandTicks = 200

// node is one process of a snapshot.
type node struct {
	info proc.Info
	argv []string
	mk   *markers // read once, by markersOf
}

// table is one snapshot of the process table.
type table struct {
	byPID map[int]*node
	// cgroup reads a process's cgroup v2 path; a field so tests can say.
	cgroup func(pid int) string
}

func readTable() (*table, error) {
	infos, err := proc.Scan()
	if err != nil {
		return nil, fmt.Errorf("read the process table: %w", err)
	}
	t := &table{byPID: make(map[int]*node, len(infos)), cgroup: func(pid int) string {
		cg, _ := proc.Cgroup(pid)
		return cg
	}}
	for _, info := range infos {
		argv, _ := proc.Cmdline(info.PID) // gone meanwhile: no argv, never a candidate
		t.byPID[info.PID] = &node{info: info, argv: argv}
	}
	return t, nil
}

// verdict is what a process's ancestry says about it.
type verdict int

const (
	verdictHost    verdict = iota // a live host (or a service manager) owns it
	verdictOrphan                 // its host died: a reaper inherited it
	verdictTracked                // a supervisor daemon or init owns its tree
	verdictUnknown                // the chain could not be followed
)

// lineage is the walk up a process's PPID chain.
type lineage struct {
	verdict verdict
	anchor  *node // where the walk ended: the host, the reaper, the supervisor
	chain   []int // the launchers passed on the way, nearest first
	why     string
}

// lineage walks pid's ancestry, passing launchers and shells, to the first
// ancestor that decides: a supervisor daemon or init (tracked), PID 1 or a
// reaper (orphaned, unless it is the reaper's own command or a systemd
// service), anything else (a live host).
func (t *table) lineage(pid int) lineage {
	n := t.byPID[pid]
	if n == nil {
		return lineage{verdict: verdictUnknown, why: "gone"}
	}
	top := n // the process just below the ancestor under inspection
	var chain []int
	seen := map[int]bool{pid: true}
	for cur := n.info.PPID; ; {
		if cur == 0 {
			return lineage{verdict: verdictUnknown, chain: chain, why: "its parent is outside this PID namespace"}
		}
		if seen[cur] || len(chain) > 64 {
			return lineage{verdict: verdictUnknown, chain: chain, why: "its parent chain loops"}
		}
		seen[cur] = true
		a := t.byPID[cur]
		if a == nil {
			// Exited between the scan's reads: its child has not been
			// re-parented yet, so nothing is proven either way.
			return lineage{verdict: verdictUnknown, chain: chain, why: fmt.Sprintf("ancestor %d exited during the scan", cur)}
		}
		if isSupervisorOwner(a) {
			return lineage{verdict: verdictTracked, anchor: a, chain: chain, why: "a supervisor owns its tree"}
		}
		if a.info.PID == 1 || reapers[a.info.Comm] {
			if top.info.Token.StartTicks >= a.info.Token.StartTicks &&
				top.info.Token.StartTicks-a.info.Token.StartTicks < ownCommandTicks {
				return lineage{verdict: verdictHost, anchor: a, chain: chain, why: "it is its reaper's own command"}
			}
			if a.info.Comm == "systemd" && strings.HasSuffix(t.cgroup(top.info.PID), ".service") {
				return lineage{verdict: verdictHost, anchor: a, chain: chain, why: "it runs as a systemd service"}
			}
			return lineage{verdict: verdictOrphan, anchor: a, chain: chain}
		}
		if session.IsLauncher(a.info.Comm, a.argv) {
			chain = append(chain, cur)
			top = a
			cur = a.info.PPID
			continue
		}
		return lineage{verdict: verdictHost, anchor: a, chain: chain, why: "its host lives"}
	}
}

// isSupervisorOwner recognizes `supervisor daemon` (not its stop or
// restart clients) and `supervisor init`: both reap and cascade their
// whole tree, so nothing below them is leaked.
func isSupervisorOwner(n *node) bool {
	if len(n.argv) < 2 || (filepath.Base(n.argv[0]) != "supervisor" && n.info.Comm != "supervisor") {
		return false
	}
	switch n.argv[1] {
	case "init":
		return true
	case "daemon":
		return len(n.argv) == 2 || strings.HasPrefix(n.argv[2], "-")
	}
	return false
}

// ancestors returns pid and every ancestor of it.
func (t *table) ancestors(pid int) map[int]bool {
	out := map[int]bool{}
	for cur := pid; cur > 0 && !out[cur]; {
		out[cur] = true
		n := t.byPID[cur]
		if n == nil {
			break
		}
		cur = n.info.PPID
	}
	return out
}

// descendants counts the processes below pid.
func (t *table) descendants(pid int) int {
	children := map[int][]int{}
	for _, n := range t.byPID {
		children[n.info.PPID] = append(children[n.info.PPID], n.info.PID)
	}
	count := 0
	queue := []int{pid}
	seen := map[int]bool{pid: true}
	for len(queue) > 0 {
		p := queue[0]
		queue = queue[1:]
		for _, c := range children[p] {
			if !seen[c] {
				seen[c] = true
				count++
				queue = append(queue, c)
			}
		}
	}
	return count
}

// markers are a process's supervisor markers.
type markers struct {
	procID, instance string
	has              bool
	logWriter        bool // the daemon's log hub: marked, but no server
}

// markersOf reads n's markers from its environment once: isOrphan and
// checkMarkers both ask.
func markersOf(n *node) markers {
	if n.mk == nil {
		n.mk = &markers{}
		if env, err := proc.Environ(n.info.PID); err == nil {
			id, ok := proc.EnvValue(env, spawn.EnvProcID)
			inst, _ := proc.EnvValue(env, spawn.EnvInstance)
			w, _ := proc.EnvValue(env, spawn.EnvLogWriter)
			*n.mk = markers{procID: id, instance: inst, has: ok, logWriter: w == "1"}
		}
	}
	return *n.mk
}

// isOrphan judges one process of the table: whether it is an orphan
// the doctor may report (and stop).
func (d *Doctor) isOrphan(t *table, n *node, dm daemonState, excluded map[int]bool) (lineage, bool) {
	if excluded[n.info.PID] || n.info.PID <= 1 || n.info.UID != os.Getuid() ||
		n.info.State == 'Z' || n.info.State == 'X' || !LooksLikeMCP(n.argv) {
		return lineage{}, false
	}
	if dm.pid > 0 && t.ancestors(n.info.PID)[dm.pid] {
		return lineage{}, false // the daemon's own descendant
	}
	if m := markersOf(n); m.has {
		// This instance's marker is judged by checkMarkers; another
		// instance's belongs to that instance's daemon.
		return lineage{}, false
	}
	lin := t.lineage(n.info.PID)
	return lin, lin.verdict == verdictOrphan
}

// checkProcesses finds orphans and marker holders without a record.
func (d *Doctor) checkProcesses(dm daemonState) ([]Finding, error) {
	t, err := readTable()
	if err != nil {
		return nil, err
	}
	excluded := t.ancestors(d.self())
	var out []Finding

	orphans := map[int]lineage{}
	for _, n := range t.byPID {
		if lin, ok := d.isOrphan(t, n, dm, excluded); ok {
			orphans[n.info.PID] = lin
		}
	}
	for pid, lin := range orphans {
		// Of a leaked chain (npm exec → sh → node) the top is reported:
		// the cascade that stops it takes the rest.
		covered := false
		for _, p := range lin.chain {
			if _, ok := orphans[p]; ok {
				covered = true
			}
		}
		if covered || !d.inScope(pid) {
			continue
		}
		n := t.byPID[pid]
		tok, err := proc.TokenOf(pid)
		if err != nil || !tok.Matches(n.info.Token) {
			continue // gone since the scan
		}
		f := Finding{
			Kind: KindOrphan, PID: pid,
			Evidence:  orphanEvidence(t, n, lin),
			Fix:       fmt.Sprintf("stop pid %d and its tree through the stop cascade (`supervisor doctor --fix` does)", pid),
			Stoppable: true,
			token:     tok, what: shortArgv(n.argv),
		}
		switch {
		case hostsAServer(t, n): // one table walk; provable would walk it again
			f.Stoppable = false
			f.Evidence += "; it runs an MCP server as its own child, which makes it that server's host, not a leaked server"
			f.Fix = fmt.Sprintf("not stopped by `supervisor doctor --fix`: a host is the user's to end (`kill %d` if it is a leftover)", pid)
		case !namesServer(t, n, lin):
			f.Stoppable = false
			f.Evidence += "; it looks like MCP by name only: neither its argv nor a launcher's names a known MCP package or binary as the program it runs"
			f.Fix = fmt.Sprintf("not stopped by `supervisor doctor --fix`: if it is yours, `kill %d`", pid)
		}
		out = append(out, f)
	}

	sortFindings(out)
	return append(out, d.checkMarkers(t, dm, excluded)...), nil
}

// provable reports whether n, or a launcher of its chain, is provably an
// MCP server: what Fix needs before it stops anything.
func provable(t *table, n *node, lin lineage) bool {
	return !hostsAServer(t, n) && namesServer(t, n, lin)
}

// namesServer reports whether n's argv, or a launcher's of its chain,
// names a known MCP server as what runs.
func namesServer(t *table, n *node, lin lineage) bool {
	if ProvablyMCP(n.argv) {
		return true
	}
	for _, p := range lin.chain {
		if a := t.byPID[p]; a != nil && ProvablyMCP(a.argv) {
			return true
		}
	}
	return false
}

// hostsAServer reports a process that is no launcher and runs an MCP
// server as its own child: that makes it the server's host (a driver
// started with nohup, a host whose terminal closed), whatever its argv
// says, and stopping it would take the host down.
func hostsAServer(t *table, n *node) bool {
	if session.IsLauncher(n.info.Comm, n.argv) {
		return false
	}
	for _, c := range t.byPID {
		if c.info.PPID == n.info.PID && c.info.State != 'Z' && servesMCP(c) {
			return true
		}
	}
	return false
}

// servesMCP reports a process that is, or may be, an MCP server a host
// runs: one that looks like MCP (the loose test: a host's child is
// judged generously, since a false yes only spares its parent), a
// `supervisor run` shim (the server is what follows --), or one carrying
// a supervisor marker.
func servesMCP(c *node) bool {
	if LooksLikeMCP(c.argv) || markersOf(c).has {
		return true
	}
	if len(c.argv) > 2 && filepath.Base(c.argv[0]) == "supervisor" && c.argv[1] == "run" {
		return true
	}
	if len(c.argv) > 1 && filepath.Base(c.argv[0]) == "supervisor-run" {
		return true // the lean entry, before it execs the server or hands over
	}
	return false
}

func orphanEvidence(t *table, n *node, lin lineage) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%q (uid %d) looks like an MCP server and no host owns it: its parent chain ", shortArgv(n.argv), n.info.UID)
	for _, p := range lin.chain {
		if a := t.byPID[p]; a != nil {
			fmt.Fprintf(&b, "%s (pid %d, a launcher) -> ", a.info.Comm, p)
		}
	}
	fmt.Fprintf(&b, "ends at %s (pid %d), which inherits orphans; no supervisor daemon is among its ancestors and it carries no supervisor marker",
		lin.anchor.info.Comm, lin.anchor.info.PID)
	if k := t.descendants(n.info.PID); k > 0 {
		fmt.Fprintf(&b, "; %d descendant(s) would go with it", k)
	}
	return b.String()
}

// checkMarkers reports processes carrying this instance's
// SUPERVISOR_PROC_ID that the daemon has no record of: a crash between
// fork and record, or a lost store. Only the topmost holder of each id is
// reported; its descendants inherited the marker.
func (d *Doctor) checkMarkers(t *table, dm daemonState, excluded map[int]bool) []Finding {
	if dm.running && dm.known == nil {
		return nil // a daemon runs but could not be asked: nothing is proven
	}
	inst := d.Paths.Instance()
	holders := map[int]string{}
	for _, n := range t.byPID {
		if excluded[n.info.PID] || n.info.UID != os.Getuid() || n.info.State == 'Z' || n.info.State == 'X' {
			continue
		}
		m := markersOf(n)
		if !m.has || m.logWriter || m.instance != inst || dm.known[m.procID] {
			continue
		}
		holders[n.info.PID] = m.procID
	}
	var out []Finding
	for pid, id := range holders {
		top := true
		for a := range t.ancestors(pid) {
			if a != pid && holders[a] == id {
				top = false
			}
		}
		if !top || !d.inScope(pid) {
			continue
		}
		n := t.byPID[pid]
		f := Finding{Kind: KindMarkerWithoutRecord, PID: pid}
		if dm.running {
			f.Evidence = fmt.Sprintf("%q carries %s=%s of this instance (%s=%s, state dir %s), but the daemon (pid %d) has no record of it",
				shortArgv(n.argv), spawn.EnvProcID, id, spawn.EnvInstance, inst, d.Paths.StateDir, dm.pid)
			f.Fix = "`supervisor daemon restart`: the new daemon's recovery adopts it if its session's host lives and stops it if not"
		} else {
			f.Evidence = fmt.Sprintf("%q carries %s=%s of this instance (%s=%s, state dir %s), and no daemon runs to account for it",
				shortArgv(n.argv), spawn.EnvProcID, id, spawn.EnvInstance, inst, d.Paths.StateDir)
			f.Fix = "start the daemon (`supervisor daemon`): its recovery adopts it if its session's host lives and stops it if not"
		}
		out = append(out, f)
	}
	sortFindings(out)
	return out
}

// stopOrphan stops one orphan through the cascade, after proving again,
// on t, a snapshot fresher than the audit's, that it is the process the
// audit judged (same creation token) and that it is still orphaned.
func (d *Doctor) stopOrphan(ctx context.Context, t *table, f *Finding) string {
	tok, err := proc.TokenOf(f.PID)
	if err != nil || !tok.Matches(f.token) {
		f.Fixed = true
		return fmt.Sprintf("orphan pid %d (%s) exited on its own", f.PID, f.what)
	}
	n := t.byPID[f.PID]
	if n == nil || !n.info.Token.Matches(tok) {
		f.Fixed = true
		return fmt.Sprintf("orphan pid %d (%s) exited on its own", f.PID, f.what)
	}
	// Argv, uid, markers and ancestry are judged again on the fresh
	// snapshot. The daemon need not be asked again: an unmarked process is
	// never its record, and a supervisor ancestor is seen by its argv.
	// Orphanhood cannot be undone between this check and the cascade (a
	// process is only ever re-parented towards a reaper), and the cascade
	// verifies the token once more through the pidfd it signals.
	excluded := t.ancestors(d.self())
	lin, ok := d.isOrphan(t, n, daemonState{}, excluded)
	if !ok {
		why := "it is no longer provably orphaned"
		if lin.why != "" {
			why += " (" + lin.why + ")"
		}
		return fmt.Sprintf("left pid %d (%s) alone: %s", f.PID, f.what, why)
	}
	if !provable(t, n, lin) {
		// Its argv changed since the audit (setproctitle).
		return fmt.Sprintf("left pid %d (%s) alone: it no longer names a known MCP package or binary; kill %d yourself if it is yours", f.PID, f.what, f.PID)
	}
	target := shutdown.Target{ID: fmt.Sprintf("orphan-%d", f.PID), PID: f.PID, Token: tok}
	// Only a group the orphan leads is its own; one it merely sits in
	// belongs to whoever started it (a shell, a test runner).
	if n.info.PGID == f.PID {
		target.PGID = f.PID
	}
	ex := make([]int, 0, len(excluded))
	for p := range excluded {
		ex = append(ex, p)
	}
	c := shutdown.Cascade{Excluded: ex}
	outs := c.Stop(ctx, []shutdown.Target{target}, shutdown.Options{Grace: d.grace()})
	if len(outs) != 1 {
		return fmt.Sprintf("could not stop orphan pid %d (%s): the cascade reported nothing", f.PID, f.what)
	}
	o := outs[0]
	switch o.Result {
	case shutdown.AlreadyGone:
		f.Fixed = true
		return fmt.Sprintf("orphan pid %d (%s) exited on its own", f.PID, f.what)
	case shutdown.ExitedOnSIGTERM, shutdown.Killed, shutdown.ExitedOnEOF:
		f.Fixed = true
		return fmt.Sprintf("stopped orphan pid %d (%s): %s, %d process(es)", f.PID, f.what, o.Result, max(len(o.PIDs), 1))
	}
	return fmt.Sprintf("could not stop orphan pid %d (%s): %s, still running: %v", f.PID, f.what, o.Result, o.Left)
}

// sortFindings orders the findings of one check by PID, then path, so output
// is stable from run to run.
func sortFindings(fs []Finding) {
	sort.SliceStable(fs, func(i, j int) bool {
		if fs[i].PID != fs[j].PID {
			return fs[i].PID < fs[j].PID
		}
		return fs[i].Path < fs[j].Path
	})
}

// shortArgv joins argv for messages, cut to a readable length.
func shortArgv(argv []string) string {
	s := strings.Join(argv, " ")
	if len(s) > 160 {
		s = s[:157] + "..."
	}
	return s
}
