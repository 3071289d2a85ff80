package sandbox

import (
	"fmt"
	"runtime"
	"unsafe"

	"golang.org/x/sys/unix"
)

// What Landlock's TCP rules leave open, closed by a seccomp filter when a
// server has no network (Rules.NoNetwork): Landlock checks only TCP
// sockets, so an MPTCP socket (which Go itself uses for listeners since
// 1.24), UDP and raw sockets reach the network past it, and io_uring can
// make sockets without the socket(2) call a filter sees. The filter
// refuses, with EACCES, an internet socket that is not plain TCP, a
// socket of any family but unix and netlink (which do not leave the
// machine; vsock does, to a virtual machine's host), every io_uring, and
// any system call made through another ABI (x32, or i386 on a 64-bit
// kernel), whose numbers it cannot read.

// seccompData offsets (struct seccomp_data): the call's number, its ABI,
// and its arguments, whose low 32 bits come first on these little-endian
// machines.
const (
	offNr   = 0
	offArch = 4
	offArg0 = 16
	offArg1 = 24
	offArg2 = 32
)

// nativeArch is AUDIT_ARCH of this build; 0 where no filter is built.
func nativeArch() uint32 {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64
	}
	return 0
}

const (
	x32Bit        = 0x40000000 // set in the number of an x32 system call
	ipprotoTCP    = 6
	sockTypeMask  = 0xf
	retAllow      = unix.SECCOMP_RET_ALLOW
	retDenyAccess = unix.SECCOMP_RET_ERRNO | uint32(unix.EACCES)&unix.SECCOMP_RET_DATA
)

func stmt(code uint16, k uint32) unix.SockFilter { return unix.SockFilter{Code: code, K: k} }
func jump(code uint16, k uint32, jt, jf uint8) unix.SockFilter {
	return unix.SockFilter{Code: code, Jt: jt, Jf: jf, K: k}
}

// noNetworkFilter is the program described above, for this build's ABI.
func noNetworkFilter() ([]unix.SockFilter, error) {
	arch := nativeArch()
	if arch == 0 {
		return nil, fmt.Errorf("no seccomp filter for %s: --network none is refused here", runtime.GOARCH)
	}
	const (
		ld  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		and = unix.BPF_ALU | unix.BPF_AND | unix.BPF_K
		ret = unix.BPF_RET | unix.BPF_K
	)
	// A jump skips that many instructions: from index i, jt or jf k goes
	// to i+1+k. The two returns end it: allow at 17, deny at 18
	// (TestNoNetworkFilterJumps checks every jump lands in the program).
	prog := []unix.SockFilter{
		/* 0 */ stmt(ld, offArch),
		/* 1 */ jump(jeq, arch, 0, 16), // another ABI: deny
		/* 2 */ stmt(ld, offNr),
		/* 3 */ jump(jge, x32Bit, 14, 0), // x32: deny
		/* 4 */ jump(jeq, unix.SYS_IO_URING_SETUP, 13, 0),
		/* 5 */ jump(jeq, unix.SYS_SOCKET, 0, 11), // not socket(2): allow
		/* 6 */ stmt(ld, offArg0),
		/* 7 */ jump(jeq, unix.AF_UNIX, 9, 0), // allow
		/* 8 */ jump(jeq, unix.AF_NETLINK, 8, 0), // allow
		/* 9 */ jump(jeq, unix.AF_INET, 1, 0),
		/* 10 */ jump(jeq, unix.AF_INET6, 0, 7), // any other family (vsock, packet, ...): deny
		/* 11 */ stmt(ld, offArg1),
		/* 12 */ stmt(and, sockTypeMask),
		/* 13 */ jump(jeq, unix.SOCK_STREAM, 0, 4), // UDP, raw: deny
		/* 14 */ stmt(ld, offArg2),
		/* 15 */ jump(jeq, 0, 1, 0), // the default protocol: TCP
		/* 16 */ jump(jeq, ipprotoTCP, 0, 1), // MPTCP, SCTP: deny
		/* 17 */ stmt(ret, retAllow),
		/* 18 */ stmt(ret, retDenyAccess),
	}
	return prog, nil
}

// filterNetwork installs the filter on the calling thread (inherited by
// what it forks and execs); no_new_privs must be set.
func filterNetwork() error {
	prog, err := noNetworkFilter()
	if err != nil {
		return fmt.Errorf("cannot sandbox: %w", err)
	}
	fp := unix.SockFprog{Len: uint16(len(prog)), Filter: &prog[0]}
	if err := unix.Prctl(unix.PR_SET_SECCOMP, unix.SECCOMP_MODE_FILTER, uintptr(unsafe.Pointer(&fp)), 0, 0); err != nil {
		return fmt.Errorf("cannot sandbox: seccomp filter for no network: %w", err)
	}
	runtime.KeepAlive(prog)
	return nil
}
