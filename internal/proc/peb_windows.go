package proc

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/windows"
)

// Windows keeps a process's command line, environment and console group
// in its own memory (the PEB and its RTL_USER_PROCESS_PARAMETERS), not in
// the kernel: reading them means reading the target's memory. The layouts
// are those of x/sys/windows for this build's pointer size, and every
// offset below is taken from its types with unsafe.Offsetof, so they agree
// by construction. Remote memory is read into byte buffers and decoded by
// offset, never into Go structs with pointer fields: a foreign address in a
// Go pointer would confuse the garbage collector.

const ptrSize = unsafe.Sizeof(uintptr(0))

// pbiWords is PROCESS_BASIC_INFORMATION in pointer-sized words, so the
// buffer NtQueryInformationProcess fills is aligned and holds no Go
// pointers.
const pbiWords = (unsafe.Sizeof(windows.PROCESS_BASIC_INFORMATION{}) + ptrSize - 1) / ptrSize

// processBasic is the part of PROCESS_BASIC_INFORMATION this package uses.
type processBasic struct {
	peb    uintptr // address of the PEB, in the target's address space
	parent uintptr // InheritedFromUniqueProcessId
}

// basicInfo queries ProcessBasicInformation.
func basicInfo(h windows.Handle) (processBasic, error) {
	var raw [pbiWords]uintptr
	if err := windows.NtQueryInformationProcess(h, windows.ProcessBasicInformation,
		unsafe.Pointer(&raw[0]), uint32(unsafe.Sizeof(windows.PROCESS_BASIC_INFORMATION{})), nil); err != nil {
		return processBasic{}, fmt.Errorf("NtQueryInformationProcess(ProcessBasicInformation): %w", err)
	}
	return processBasic{
		peb:    raw[unsafe.Offsetof(windows.PROCESS_BASIC_INFORMATION{}.PebBaseAddress)/ptrSize],
		parent: raw[unsafe.Offsetof(windows.PROCESS_BASIC_INFORMATION{}.InheritedFromUniqueProcessId)/ptrSize],
	}, nil
}

// readMem reads n bytes at addr of the process h.
func readMem(h windows.Handle, addr uintptr, n int) ([]byte, error) {
	if n == 0 {
		return nil, nil
	}
	if addr == 0 {
		return nil, errors.New("read remote memory: null address")
	}
	buf := make([]byte, n)
	var got uintptr
	if err := windows.ReadProcessMemory(h, addr, &buf[0], uintptr(n), &got); err != nil {
		return buf[:got], fmt.Errorf("ReadProcessMemory %d bytes at %#x: %w", n, addr, err)
	}
	return buf[:got], nil
}

// ptrAt decodes a pointer-sized little-endian value (Windows is
// little-endian on every architecture Go supports).
func ptrAt(b []byte, off uintptr) uintptr {
	if ptrSize == 8 {
		return uintptr(binary.LittleEndian.Uint64(b[off:]))
	}
	return uintptr(binary.LittleEndian.Uint32(b[off:]))
}

// params is the decoded part of a target's RTL_USER_PROCESS_PARAMETERS.
type params struct {
	cmdline     uintptr // CommandLine.Buffer
	cmdlineLen  int     // CommandLine.Length, in bytes
	env         uintptr // Environment
	envSize     int     // EnvironmentSize in bytes; 0 where unknown
	group       uint32  // ProcessGroupId
	hasGroup    bool    // the structure is recent enough to hold it
	structBytes int
}

// Offsets into the target's structures, from x/sys's declarations.
const (
	offParamsPEB = unsafe.Offsetof(windows.PEB{}.ProcessParameters)
	offLength    = unsafe.Offsetof(windows.RTL_USER_PROCESS_PARAMETERS{}.Length)
	offFlags     = unsafe.Offsetof(windows.RTL_USER_PROCESS_PARAMETERS{}.Flags)
	offCmdline   = unsafe.Offsetof(windows.RTL_USER_PROCESS_PARAMETERS{}.CommandLine)
	offEnv       = unsafe.Offsetof(windows.RTL_USER_PROCESS_PARAMETERS{}.Environment)
	offEnvSize   = unsafe.Offsetof(windows.RTL_USER_PROCESS_PARAMETERS{}.EnvironmentSize)
	offGroup     = unsafe.Offsetof(windows.RTL_USER_PROCESS_PARAMETERS{}.ProcessGroupId)
	offUSLength  = unsafe.Offsetof(windows.NTUnicodeString{}.Length)
	offUSBuffer  = unsafe.Offsetof(windows.NTUnicodeString{}.Buffer)
	paramsSize   = unsafe.Sizeof(windows.RTL_USER_PROCESS_PARAMETERS{})

	// paramsNormalized (RTL_USER_PROC_PARAMS_NORMALIZED) in Flags means the
	// string buffers hold addresses; without it, as in a process created
	// suspended that has not run its loader yet, they hold offsets from the
	// structure's start.
	paramsNormalized = 0x01
)

// errOtherBitness is returned for a WOW64 target (a 32-bit process seen
// from a 64-bit one, or the reverse): its PEB has the other layout.
var errOtherBitness = fmt.Errorf("process of another bitness (WOW64): %w", errors.ErrUnsupported)

// readParams locates and decodes the target's process parameters.
func readParams(h windows.Handle) (params, error) {
	var self, target bool
	if err := windows.IsWow64Process(windows.CurrentProcess(), &self); err != nil {
		return params{}, fmt.Errorf("IsWow64Process(self): %w", err)
	}
	if err := windows.IsWow64Process(h, &target); err != nil {
		return params{}, fmt.Errorf("IsWow64Process: %w", err)
	}
	if self != target {
		return params{}, errOtherBitness
	}
	pbi, err := basicInfo(h)
	if err != nil {
		return params{}, err
	}
	b, err := readMem(h, pbi.peb+offParamsPEB, int(ptrSize))
	if err != nil {
		return params{}, fmt.Errorf("read PEB: %w", err)
	}
	addr := ptrAt(b, 0)
	// The structure grew over Windows versions; its Length field says how
	// much of it this process has. Read no more than that, nor than x/sys
	// knows of.
	hdr, err := readMem(h, addr, int(offLength+4))
	if err != nil {
		return params{}, fmt.Errorf("read process parameters: %w", err)
	}
	n := min(int(binary.LittleEndian.Uint32(hdr[offLength:])), int(paramsSize))
	if n < int(offEnv+ptrSize) {
		return params{}, fmt.Errorf("process parameters of %d bytes are too short", n)
	}
	b, err = readMem(h, addr, n)
	if err != nil {
		return params{}, fmt.Errorf("read process parameters: %w", err)
	}
	p := params{
		cmdline:     ptrAt(b, offCmdline+offUSBuffer),
		cmdlineLen:  int(binary.LittleEndian.Uint16(b[offCmdline+offUSLength:])),
		env:         ptrAt(b, offEnv),
		structBytes: n,
	}
	if binary.LittleEndian.Uint32(b[offFlags:])&paramsNormalized == 0 && p.cmdline != 0 {
		p.cmdline += addr
	}
	if n >= int(offEnvSize+ptrSize) {
		p.envSize = int(ptrAt(b, offEnvSize))
	}
	if n >= int(offGroup+4) {
		p.group = binary.LittleEndian.Uint32(b[offGroup:])
		p.hasGroup = true
	}
	return p, nil
}

// openForMemory opens pid to read its parameters.
func openForMemory(pid int) (windows.Handle, error) {
	return openProcess(pid,
		windows.PROCESS_QUERY_INFORMATION|windows.PROCESS_VM_READ,
		windows.PROCESS_QUERY_LIMITED_INFORMATION|windows.PROCESS_VM_READ)
}

// readErr explains a failed read of pid's memory. It returns nil when the
// process has exited: an exited process that some handle keeps has no
// address space left, and like a zombie's on Linux its command line and
// environment read as empty.
func readErr(h windows.Handle, pid int, what string, err error) error {
	if errors.Is(err, errors.ErrUnsupported) {
		return fmt.Errorf("%s of pid %d: %w", what, pid, err)
	}
	if gone, gerr := hasExited(h); gerr == nil && gone {
		return nil
	}
	return fmt.Errorf("%s of pid %d: %w", what, pid, err)
}

// Cmdline returns the argv of pid, split from its command line the way
// the C runtime and windows.DecomposeCommandLine split it. (Windows passes
// one string; how a program splits it is its own business, but nearly all
// use these rules.) It is empty for an exited process a handle still
// keeps; a process of another bitness gives an error wrapping
// errors.ErrUnsupported.
func Cmdline(pid int) ([]string, error) {
	h, err := openForMemory(pid)
	if err != nil {
		return nil, err
	}
	defer windows.CloseHandle(h)
	p, err := readParams(h)
	if err != nil {
		return nil, readErr(h, pid, "command line", err)
	}
	b, err := readMem(h, p.cmdline, p.cmdlineLen)
	if err != nil {
		return nil, readErr(h, pid, "command line", err)
	}
	line := decodeUTF16LE(b)
	if line == "" {
		return nil, nil
	}
	argv, err := windows.DecomposeCommandLine(line)
	if err != nil {
		return nil, fmt.Errorf("split command line of pid %d: %w", pid, err)
	}
	return argv, nil
}

// maxEnvBlock bounds how much of an environment block is read: far above
// any real one, low enough that a corrupt size cannot exhaust memory.
const maxEnvBlock = 16 << 20

// Environ returns the environment of pid as KEY=VALUE strings, as the
// process holds it now (SetEnvironmentVariable calls included). It is empty
// for an exited process a handle still keeps; a process of another bitness
// gives an error wrapping errors.ErrUnsupported.
func Environ(pid int) ([]string, error) {
	h, err := openForMemory(pid)
	if err != nil {
		return nil, err
	}
	defer windows.CloseHandle(h)
	p, err := readParams(h)
	if err != nil {
		return nil, readErr(h, pid, "environment", err)
	}
	var b []byte
	if p.envSize > 0 {
		b, err = readMem(h, p.env, min(p.envSize, maxEnvBlock))
	}
	if p.envSize == 0 || err != nil && len(b) == 0 {
		// No size, or a stale one that runs off the allocation: find the
		// end instead.
		b, err = readUntilDoubleNUL(h, p.env)
	}
	if err != nil && len(b) == 0 {
		return nil, readErr(h, pid, "environment", err)
	}
	// A short read keeps the complete entries: decodeEnvBlock drops a cut
	// one.
	return decodeEnvBlock(b), nil
}

// readUntilDoubleNUL reads an environment block whose size is unknown,
// a page at a time (a read across the end of the allocation would fail
// whole), until the UTF-16 double NUL that ends it.
func readUntilDoubleNUL(h windows.Handle, addr uintptr) ([]byte, error) {
	const page = 4096
	var out []byte
	for len(out) < maxEnvBlock {
		n := page - int(addr%page)
		b, err := readMem(h, addr, n)
		// Resume the search one unit back: the pair may straddle pages.
		from := max(0, len(out)-2) &^ 1
		out = append(out, b...)
		for i := from; i+3 < len(out); i += 2 {
			if out[i] == 0 && out[i+1] == 0 && out[i+2] == 0 && out[i+3] == 0 {
				return out[:i+4], nil
			}
		}
		if err != nil {
			return out, err
		}
		addr += uintptr(n)
	}
	return out, nil
}

// consoleGroup returns the console process group pid belongs to (its own
// PID when it was started with CREATE_NEW_PROCESS_GROUP).
func consoleGroup(pid int) (uint32, error) {
	h, err := openProcess(pid,
		windows.PROCESS_QUERY_LIMITED_INFORMATION|windows.PROCESS_VM_READ,
		windows.PROCESS_QUERY_INFORMATION|windows.PROCESS_VM_READ)
	if err != nil {
		return 0, err
	}
	defer windows.CloseHandle(h)
	p, err := readParams(h)
	if err != nil {
		return 0, fmt.Errorf("process parameters of pid %d: %w", pid, err)
	}
	if !p.hasGroup {
		return 0, fmt.Errorf("process parameters of %d bytes hold no process group: %w", p.structBytes, errors.ErrUnsupported)
	}
	return p.group, nil
}

// ownConsoleGroup returns this process's console process group, read from
// its own parameters block.
func ownConsoleGroup() (uint32, bool) {
	peb := windows.RtlGetCurrentPeb()
	if peb == nil || peb.ProcessParameters == nil {
		return 0, false
	}
	pp := peb.ProcessParameters
	if uintptr(pp.Length) < offGroup+4 {
		return 0, false
	}
	return pp.ProcessGroupId, true
}
