package spawn

import "syscall"

// platformAttr sets what only Linux has: the parent-death signal and the
// clone into a cgroup.
func platformAttr(sys *syscall.SysProcAttr, req Request) error {
	sys.Pdeathsig = req.Pdeathsig
	if req.CgroupFD > 0 {
		sys.UseCgroupFD = true
		sys.CgroupFD = req.CgroupFD
	}
	return nil
}
