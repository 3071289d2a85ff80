package proc

import (
	"bufio"
	"os"
	"strconv"
	"strings"
)

// PortListeners finds the processes that hold a socket listening on TCP
// port (IPv4 or IPv6), from /proc/net/tcp{,6} inodes to fd owners. Sockets
// of other users' processes are reported with PID 0 when their owner
// cannot be read.
func PortListeners(port int) []Listener {
	inodes := map[uint64]bool{}
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		for _, ino := range listeningInodes(f, port) {
			inodes[ino] = true
		}
	}
	if len(inodes) == 0 {
		return nil
	}
	infos, _ := Scan()
	pids := make([]int, 0, len(infos))
	for _, i := range infos {
		pids = append(pids, i.PID)
	}
	seen := map[int]bool{}
	var out []Listener
	for _, ref := range FdHolders(pids, inodes) {
		if seen[ref.PID] {
			continue
		}
		seen[ref.PID] = true
		argv, _ := Cmdline(ref.PID)
		out = append(out, Listener{PID: ref.PID, Argv: argv, Inode: ref.Inode})
		delete(inodes, ref.Inode)
	}
	for ino := range inodes {
		out = append(out, Listener{Inode: ino})
	}
	return out
}

// listeningInodes parses one /proc/net/tcp file: "sl local rem st ... inode".
func listeningInodes(path string, port int) []uint64 {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	want := strings.ToUpper(strconv.FormatInt(int64(port), 16))
	for len(want) < 4 {
		want = "0" + want
	}
	var out []uint64
	sc := bufio.NewScanner(f)
	sc.Scan() // header
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 10 || fields[3] != "0A" { // 0A: TCP_LISTEN
			continue
		}
		_, p, ok := strings.Cut(fields[1], ":")
		if !ok || p != want {
			continue
		}
		if ino, err := strconv.ParseUint(fields[9], 10, 64); err == nil && ino != 0 {
			out = append(out, ino)
		}
	}
	return out
}
