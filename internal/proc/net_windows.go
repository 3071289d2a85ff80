package proc

import (
	"encoding/binary"
	"fmt"
	"syscall"
	"unsafe"

	"golang.org/x/sys/windows"
)

var (
	modiphlpapi             = windows.NewLazySystemDLL("iphlpapi.dll")
	procGetExtendedTcpTable = modiphlpapi.NewProc("GetExtendedTcpTable")
)

// GetExtendedTcpTable's table class and the layouts of its owner-PID rows
// (MIB_TCPROW_OWNER_PID, MIB_TCP6ROW_OWNER_PID: DWORDs and byte arrays
// only, so the same on every architecture). Each table starts with a DWORD
// entry count.
const (
	tcpTableOwnerPIDListener = 3 // TCP_TABLE_OWNER_PID_LISTENER

	tcp4RowSize, tcp4PortOff, tcp4PIDOff = 24, 8, 20
	tcp6RowSize, tcp6PortOff, tcp6PIDOff = 56, 20, 52
)

// PortListeners finds the processes that hold a socket listening on TCP
// port (IPv4 or IPv6), from GetExtendedTcpTable's owner-PID tables. Windows
// has no socket inodes: Inode is 0. A port held by the kernel's HTTP
// server (http.sys) is reported as PID 4, the System process.
func PortListeners(port int) []Listener {
	if procGetExtendedTcpTable.Find() != nil {
		return nil
	}
	seen := map[int]bool{}
	var out []Listener
	for _, t := range []struct {
		af                       uint32
		rowSize, portOff, pidOff int
	}{
		{windows.AF_INET, tcp4RowSize, tcp4PortOff, tcp4PIDOff},
		{windows.AF_INET6, tcp6RowSize, tcp6PortOff, tcp6PIDOff},
	} {
		b, err := tcpListeners(t.af)
		if err != nil || len(b) < 4 {
			continue
		}
		n := int(binary.LittleEndian.Uint32(b))
		for i := 0; i < n; i++ {
			row := 4 + i*t.rowSize
			if row+t.rowSize > len(b) {
				break
			}
			// The port is in network byte order in the low word.
			p := int(b[row+t.portOff])<<8 | int(b[row+t.portOff+1])
			pid := int(binary.LittleEndian.Uint32(b[row+t.pidOff:]))
			if p != port || seen[pid] {
				continue
			}
			seen[pid] = true
			argv, _ := Cmdline(pid)
			out = append(out, Listener{PID: pid, Argv: argv})
		}
	}
	return out
}

// tcpListeners returns the raw listener table of one address family,
// growing the buffer as the call asks.
func tcpListeners(af uint32) ([]byte, error) {
	size := uint32(16 << 10)
	for range 8 {
		// DWORD-aligned, as the table's rows are.
		buf := make([]uint32, (size+3)/4)
		r, _, _ := procGetExtendedTcpTable.Call(
			uintptr(unsafe.Pointer(&buf[0])), uintptr(unsafe.Pointer(&size)),
			0, uintptr(af), tcpTableOwnerPIDListener, 0)
		switch syscall.Errno(r) {
		case 0:
			return unsafe.Slice((*byte)(unsafe.Pointer(&buf[0])), len(buf)*4), nil
		case windows.ERROR_INSUFFICIENT_BUFFER:
			continue // size now holds what the table needs
		default:
			return nil, fmt.Errorf("GetExtendedTcpTable: %w", syscall.Errno(r))
		}
	}
	return nil, fmt.Errorf("GetExtendedTcpTable: table kept growing")
}
