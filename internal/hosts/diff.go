package hosts

import (
	"bytes"
	"fmt"
	"strings"
)

// UnifiedDiff renders the change from old to new as a unified diff (three
// lines of context), as `diff -u` would; "" when they are equal.
func UnifiedDiff(oldName, newName string, old, new []byte) string {
	if bytes.Equal(old, new) {
		return ""
	}
	a, b := splitLines(old), splitLines(new)
	ops := diffLines(a, b)
	const context = 3
	var out strings.Builder
	fmt.Fprintf(&out, "--- %s\n+++ %s\n", oldName, newName)
	for i := 0; i < len(ops); {
		if ops[i].kind == ' ' {
			i++
			continue
		}
		// A hunk: from context lines before this change through the last
		// change that is at most 2*context equal lines from the next.
		start := i
		for start > 0 && i-start < context && ops[start-1].kind == ' ' {
			start--
		}
		end := i
		for j := i; j < len(ops); j++ {
			if ops[j].kind != ' ' {
				end = j + 1
				continue
			}
			if j-end >= 2*context {
				break
			}
		}
		stop := end
		for stop < len(ops) && stop-end < context && ops[stop].kind == ' ' {
			stop++
		}
		h := ops[start:stop]
		oldN, newN := 0, 0
		for _, op := range h {
			if op.kind != '+' {
				oldN++
			}
			if op.kind != '-' {
				newN++
			}
		}
		fmt.Fprintf(&out, "@@ -%s +%s @@\n", hunkRange(h[0].a, oldN), hunkRange(h[0].b, newN))
		for _, op := range h {
			line := op.line
			out.WriteByte(op.kind)
			out.WriteString(line)
			if !strings.HasSuffix(line, "\n") {
				out.WriteString("\n\\ No newline at end of file\n")
			}
		}
		i = stop
	}
	return out.String()
}

// hunkRange is "start,count" with 1-based start (the line before when the
// side is empty, as diff -u prints it).
func hunkRange(at, n int) string {
	if n == 0 {
		return fmt.Sprintf("%d,0", at)
	}
	if n == 1 {
		return fmt.Sprintf("%d", at+1)
	}
	return fmt.Sprintf("%d,%d", at+1, n)
}

type diffOp struct {
	kind byte // ' ', '-', '+'
	line string
	a, b int // 0-based index of the line in old and new where this op is
}

func splitLines(b []byte) []string {
	var out []string
	for len(b) > 0 {
		i := bytes.IndexByte(b, '\n')
		if i < 0 {
			out = append(out, string(b))
			break
		}
		out = append(out, string(b[:i+1]))
		b = b[i+1:]
	}
	return out
}

// diffLines is a longest-common-subsequence line diff. Config edits touch a
// few lines of a long file, so the common head and tail are cut off first
// and only the middle is compared line by line.
func diffLines(a, b []string) []diffOp {
	pre := 0
	for pre < len(a) && pre < len(b) && a[pre] == b[pre] {
		pre++
	}
	suf := 0
	for suf < len(a)-pre && suf < len(b)-pre && a[len(a)-1-suf] == b[len(b)-1-suf] {
		suf++
	}
	var ops []diffOp
	for i := 0; i < pre; i++ {
		ops = append(ops, diffOp{' ', a[i], i, i})
	}
	ma, mb := a[pre:len(a)-suf], b[pre:len(b)-suf]
	ops = append(ops, lcsOps(ma, mb, pre)...)
	for i := 0; i < suf; i++ {
		ia, ib := len(a)-suf+i, len(b)-suf+i
		ops = append(ops, diffOp{' ', a[ia], ia, ib})
	}
	return ops
}

func lcsOps(a, b []string, off int) []diffOp {
	var ops []diffOp
	if len(a)*len(b) > 4_000_000 { // too big to compare: replace it whole
		for i, l := range a {
			ops = append(ops, diffOp{'-', l, off + i, off})
		}
		for j, l := range b {
			ops = append(ops, diffOp{'+', l, off + len(a), off + j})
		}
		return ops
	}
	// n[i][j] is the LCS length of a[i:] and b[j:].
	n := make([][]int, len(a)+1)
	for i := range n {
		n[i] = make([]int, len(b)+1)
	}
	for i := len(a) - 1; i >= 0; i-- {
		for j := len(b) - 1; j >= 0; j-- {
			if a[i] == b[j] {
				n[i][j] = n[i+1][j+1] + 1
			} else {
				n[i][j] = max(n[i+1][j], n[i][j+1])
			}
		}
	}
	i, j := 0, 0
	for i < len(a) || j < len(b) {
		switch {
		case i < len(a) && j < len(b) && a[i] == b[j]:
			ops = append(ops, diffOp{' ', a[i], off + i, off + j})
			i, j = i+1, j+1
		case i < len(a) && (j == len(b) || n[i+1][j] >= n[i][j+1]):
			ops = append(ops, diffOp{'-', a[i], off + i, off + j})
			i++
		default:
			ops = append(ops, diffOp{'+', b[j], off + i, off + j})
			j++
		}
	}
	return ops
}
