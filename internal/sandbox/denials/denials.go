// Package denials reads what the kernel says a sandbox denied: Landlock's
// audit records (Linux 6.15 and later), joined into one Denial per denied
// access, with the sandbox it came from and the process that tried.
//
// The kernel writes them only while its audit is on, and hands them to
// readers with CAP_AUDIT_READ (root): elsewhere a denied file shows only
// in the server's own errors (docs/sandbox.md).
package denials

import (
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Record types of the audit protocol (linux/audit.h).
const (
	typeSyscall = 1300 // the system call a record was made in: its pid
	typeEOE     = 1320 // the end of an event's records
	typeAccess  = 1423 // AUDIT_LANDLOCK_ACCESS: a denied access
	typeDomain  = 1424 // AUDIT_LANDLOCK_DOMAIN: a domain's creator, at its first denial
)

// Denial is one access a Landlock domain denied.
type Denial struct {
	// Domain is the kernel's id of the sandbox (hex), the same for every
	// process in it.
	Domain string
	// Tag is the name the thread that made the domain had then (at most
	// 15 bytes: the supervisor names it after the server), and Creator its
	// process: both only in the first denial of a domain.
	Tag     string
	Creator int
	// PID and Comm are the process that was denied, where the kernel
	// audits system calls (0 and "" where its rules turn that off).
	PID  int
	Comm string
	// What is the kind: "file", "network", "signal", "socket" (an
	// abstract unix socket) or "process" (ptrace).
	What string
	// Blockers are the rights that were missing ("fs.read_file").
	Blockers string
	// Object is what was denied: a path, an address and port, a process.
	Object string
}

// String is the denial as an event says it.
func (d Denial) String() string {
	s := d.What + ": " + d.Object + ": " + d.Blockers + " denied"
	switch {
	case d.PID > 0 && d.Comm != "":
		s += fmt.Sprintf(" (process %d, %s)", d.PID, d.Comm)
	case d.PID > 0:
		s += fmt.Sprintf(" (process %d)", d.PID)
	}
	return s
}

// Joiner assembles the records of audit events into Denials: an access
// record, the domain record that comes with a domain's first denial, and
// the system call record that names the process. An event is complete at
// its end-of-event record, or, where the kernel audits no system calls
// (no end record comes), after a while (Flush).
type Joiner struct {
	pending map[string]*partial // by the event's "time:serial"
}

type partial struct {
	d    Denial
	seen time.Time
}

// Add takes one record (its type and its text, "audit(T:S): k=v ...") and
// returns the denials it completes.
func (j *Joiner) Add(typ int, text string, now time.Time) []Denial {
	id, ok := eventID(text)
	if !ok {
		return nil
	}
	p := j.pending[id]
	if p == nil && typ != typeAccess {
		// Not a Landlock denial's: a machine that audits its system calls
		// sends many, and reading their fields would cost the daemon.
		return nil
	}
	_, fields, ok := split(text)
	if !ok {
		return nil
	}
	if j.pending == nil {
		j.pending = map[string]*partial{}
	}
	switch typ {
	case typeAccess:
		d := access(fields)
		if d.Domain == "" {
			return nil
		}
		if p != nil {
			// A second access in one system call (rename: both ends):
			// the first is complete as far as it goes.
			done := p.d
			p.d, p.seen = d, now
			return []Denial{done}
		}
		j.pending[id] = &partial{d: d, seen: now}
	case typeDomain:
		if p != nil && fields["status"] == "allocated" && fields["domain"] == p.d.Domain {
			p.d.Tag = fields["comm"]
			p.d.Creator, _ = strconv.Atoi(fields["pid"])
		}
	case typeSyscall:
		if p != nil {
			p.d.PID, _ = strconv.Atoi(fields["pid"])
			p.d.Comm = fields["comm"]
		}
	case typeEOE:
		if p != nil {
			delete(j.pending, id)
			return []Denial{p.d}
		}
	}
	return nil
}

// Flush returns the denials whose event has waited longer than after for
// its end: the kernel sends none where it audits no system calls.
func (j *Joiner) Flush(now time.Time, after time.Duration) []Denial {
	var out []Denial
	for id, p := range j.pending {
		if now.Sub(p.seen) >= after {
			out = append(out, p.d)
			delete(j.pending, id)
		}
	}
	return out
}

// access reads an access record's fields into a Denial.
func access(f map[string]string) Denial {
	d := Denial{Domain: f["domain"], Blockers: f["blockers"]}
	kind := d.Blockers
	if i := strings.IndexAny(kind, ".,"); i >= 0 {
		kind = kind[:i]
	}
	switch kind {
	case "fs":
		d.What = "file"
		d.Object = f["path"]
		if d.Object == "" {
			d.Object = f["name"] // a dentry without a path: its name alone
		}
		if d.Object == "" && f["ino"] != "" {
			d.Object = "inode " + f["ino"] + " of device " + f["dev"]
		}
		if d.Object == "" {
			d.Object = "a file the record does not name"
		}
	case "net":
		d.What = "network"
		switch {
		case f["daddr"] != "":
			d.Object = hostPort(f["daddr"], f["dest"])
		case f["saddr"] != "":
			d.Object = "bind " + hostPort(f["saddr"], f["src"])
		default:
			d.Object = "a TCP port"
		}
	case "scope":
		if strings.HasPrefix(d.Blockers, "scope.signal") {
			d.What = "signal"
		} else {
			d.What = "socket"
		}
		d.Object = other(f)
	default: // "ptrace"
		d.What = "process"
		d.Object = other(f)
	}
	return d
}

func hostPort(addr, port string) string {
	if strings.Contains(addr, ":") {
		return "[" + addr + "]:" + port
	}
	return addr + ":" + port
}

// other names the process or socket a scope or ptrace denial was about.
func other(f map[string]string) string {
	switch {
	case f["opid"] != "" && f["ocomm"] != "":
		return "process " + f["opid"] + " (" + f["ocomm"] + ")"
	case f["opid"] != "":
		return "process " + f["opid"]
	case f["path"] != "":
		return f["path"]
	}
	return "outside the sandbox"
}

// untrusted are the fields the kernel writes as untrusted strings: quoted
// where plain, else in hex (a space, a quote, a control byte).
var untrusted = map[string]bool{"path": true, "name": true, "comm": true, "exe": true, "ocomm": true}

// eventID is the "T:S" of "audit(T:S): ...": the event a record is of.
func eventID(text string) (string, bool) {
	rest, found := strings.CutPrefix(text, "audit(")
	if !found {
		return "", false
	}
	id, _, found := strings.Cut(rest, "): ")
	return id, found
}

// split reads "audit(T:S): k=v k="v" ..." into the event's id and its
// fields. A quoted value ends at the next quote: the kernel writes a
// value with a quote in it in hex.
func split(text string) (id string, fields map[string]string, ok bool) {
	id, found := eventID(text)
	if !found {
		return "", nil, false
	}
	rest := text[len("audit(")+len(id)+len("): "):]
	fields = map[string]string{}
	for rest = strings.TrimLeft(rest, " "); rest != ""; rest = strings.TrimLeft(rest, " ") {
		key, after, found := strings.Cut(rest, "=")
		if !found || strings.Contains(key, " ") {
			// A word without a value: skip it.
			_, rest, _ = strings.Cut(rest, " ")
			continue
		}
		var val string
		if strings.HasPrefix(after, `"`) {
			val, rest, found = strings.Cut(after[1:], `"`)
			if !found {
				return id, fields, true // cut short: keep what was whole
			}
		} else {
			val, rest, _ = strings.Cut(after, " ")
			if untrusted[key] && val != "(null)" {
				if b, err := hex.DecodeString(val); err == nil {
					val = string(b)
				}
			}
		}
		fields[key] = val
	}
	return id, fields, true
}
