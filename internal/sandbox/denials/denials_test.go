package denials

import (
	"reflect"
	"testing"
	"time"
)

type rec struct {
	typ  int
	text string
}

// Records as this machine's kernel (6.18) wrote them, and the ways they
// vary: no system call audit, a path in hex, a connection, a signal.
func TestJoiner(t *testing.T) {
	t0 := time.Unix(1795848997, 0)
	for _, tc := range []struct {
		name    string
		records []rec
		flush   bool // after the records, let the wait for an end pass
		want    []Denial
	}{{
		name: "first denial of a domain, with its system call",
		records: []rec{
			{typeAccess, `audit(1795848997.016:14): domain=1f381620a blockers=fs.read_file path="/etc/ld.so.cache" dev="vda" ino=672`},
			{typeDomain, `audit(1795848997.016:14): domain=1f381620a status=allocated mode=enforcing pid=21440 uid=0 exe="/tmp/auditprobe" comm="p-a48c2f3314"`},
			{typeSyscall, `audit(1795848997.016:14): arch=c000003e syscall=257 success=no exit=-13 a0=ffffff9c a1=7f18ab1530b1 a2=80000 a3=0 items=0 ppid=21432 pid=21440 auid=4294967295 uid=0 gid=0 euid=0 suid=0 fsuid=0 egid=0 sgid=0 fsgid=0 tty=(none) ses=4294967295 comm="cat" exe="/usr/bin/cat" key=(null)`},
			{1327, `audit(1795848997.016:14): proctitle=636174002F6574632F686F73746E616D65`},
			{typeEOE, `audit(1795848997.016:14): `},
		},
		want: []Denial{{Domain: "1f381620a", Tag: "p-a48c2f3314", Creator: 21440, PID: 21440, Comm: "cat", What: "file", Blockers: "fs.read_file", Object: "/etc/ld.so.cache"}},
	}, {
		name: "a path with a space, in hex; no end yet",
		records: []rec{
			{typeAccess, `audit(1.0:2): domain=5 blockers=fs.read_file path=2F686F6D652F6120622F6B6579 dev="vda" ino=1`},
		},
		want: nil,
	}, {
		name: "no system call audit: complete after the wait",
		records: []rec{
			{typeAccess, `audit(1.0:2): domain=5 blockers=fs.read_file path=2F686F6D652F6120622F6B6579 dev="vda" ino=1`},
		},
		flush: true,
		want:  []Denial{{Domain: "5", What: "file", Blockers: "fs.read_file", Object: "/home/a b/key"}},
	}, {
		name: "a connection and a bind",
		records: []rec{
			{typeAccess, `audit(1.0:3): domain=6 blockers=net.connect_tcp daddr=127.0.0.1 dest=33737`},
			{typeEOE, `audit(1.0:3): `},
			{typeAccess, `audit(1.0:4): domain=6 blockers=net.bind_tcp saddr=::1 src=8080`},
			{typeEOE, `audit(1.0:4): `},
		},
		want: []Denial{
			{Domain: "6", What: "network", Blockers: "net.connect_tcp", Object: "127.0.0.1:33737"},
			{Domain: "6", What: "network", Blockers: "net.bind_tcp", Object: "bind [::1]:8080"},
		},
	}, {
		name: "a signal out of the sandbox; a domain record of another domain is not this one's",
		records: []rec{
			{typeAccess, `audit(1.0:5): domain=7 blockers=scope.signal opid=1 ocomm="systemd"`},
			{typeDomain, `audit(1.0:5): domain=8 status=allocated mode=enforcing pid=9 uid=0 exe="/x" comm="p-other"`},
			{typeEOE, `audit(1.0:5): `},
		},
		want: []Denial{{Domain: "7", What: "signal", Blockers: "scope.signal", Object: "process 1 (systemd)"}},
	}, {
		name: "two accesses in one call (a rename): both",
		records: []rec{
			{typeAccess, `audit(1.0:6): domain=9 blockers=fs.remove_file path="/a" dev="vda" ino=2`},
			{typeAccess, `audit(1.0:6): domain=9 blockers=fs.make_reg path="/b" dev="vda" ino=3`},
			{typeEOE, `audit(1.0:6): `},
		},
		want: []Denial{
			{Domain: "9", What: "file", Blockers: "fs.remove_file", Object: "/a"},
			{Domain: "9", What: "file", Blockers: "fs.make_reg", Object: "/b"},
		},
	}, {
		name: "what is not a record, or not Landlock's, is passed over",
		records: []rec{
			{typeAccess, `garbage`},
			{typeAccess, `audit(1.0:7) no colon`},
			{typeAccess, `audit(1.0:8): blockers=fs.read_file path="/no/domain"`},
			{typeSyscall, `audit(1.0:9): pid=5 comm="x"`},
			{typeEOE, `audit(1.0:9): `},
			{typeAccess, `audit(1.0:10): domain=a blockers=fs.read_file path="/cut`},
			{typeEOE, `audit(1.0:10): `},
		},
		want: []Denial{{Domain: "a", What: "file", Blockers: "fs.read_file", Object: "a file the record does not name"}},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			var j Joiner
			var got []Denial
			for _, r := range tc.records {
				got = append(got, j.Add(r.typ, r.text, t0)...)
			}
			got = append(got, j.Flush(t0.Add(time.Millisecond), time.Second)...)
			if tc.flush {
				got = append(got, j.Flush(t0.Add(time.Second), time.Second)...)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("got  %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestDenialString(t *testing.T) {
	for _, tc := range []struct {
		d    Denial
		want string
	}{
		{Denial{What: "file", Object: "/k", Blockers: "fs.read_file", PID: 4, Comm: "cat"}, "file: /k: fs.read_file denied (process 4, cat)"},
		{Denial{What: "network", Object: "1.2.3.4:5", Blockers: "net.connect_tcp", PID: 4}, "network: 1.2.3.4:5: net.connect_tcp denied (process 4)"},
		{Denial{What: "file", Object: "/k", Blockers: "fs.execute"}, "file: /k: fs.execute denied"},
	} {
		if got := tc.d.String(); got != tc.want {
			t.Errorf("%+v: %q, want %q", tc.d, got, tc.want)
		}
	}
}
