// Package cgroup owns the supervisor's cgroup v2 subtree: finding a writable
// cgroup2 hierarchy, one cgroup per session with a fresh child per server,
// cgroup.kill, and the wait for `populated 0`. It is optional: callers fall
// back to process groups and markers where Detect fails.
//
// # Caveats
//
// On this kernel a child cloned into a cgroup after `cgroup.kill` was written
// to it is killed at once, every time. A cgroup is therefore never reused:
// each server gets a fresh one (mkdir costs ~9 µs), and processes enter it
// at clone time (SysProcAttr.UseCgroupFD), because moving a process in after
// it started can miss a child it forked first.
package cgroup
