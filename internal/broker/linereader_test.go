package broker

import (
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// lines reads r to the end: each line, or "ERR:" and the error.
func lines(r io.Reader, max int) []string {
	lr := newLineReader(r, max)
	var out []string
	for {
		line, err := lr.next()
		switch {
		case errors.Is(err, errLineTooLong):
			out = append(out, "ERR:too long")
			continue
		case errors.Is(err, io.EOF):
			return out
		case err != nil:
			out = append(out, "ERR:"+err.Error())
			return out
		}
		out = append(out, string(line))
	}
}

func TestLineReader(t *testing.T) {
	big := strings.Repeat("b", 3<<20)   // grows the buffer past its keep size
	mid := strings.Repeat("m", 300<<10) // spans several reads
	for _, tc := range []struct {
		name string
		in   string
		max  int
		want []string
	}{
		{"plain", "a\nbc\n\nd\n", 10, []string{"a", "bc", "", "d"}},
		{"final line without newline", "a\nb", 10, []string{"a", "b"}},
		{"exactly max", "abcd\nx\n", 4, []string{"abcd", "x"}},
		{"over max, then a line", "abcde\nx\n", 4, []string{"ERR:too long", "x"}},
		{"far over max, then a line", strings.Repeat("z", 200<<10) + "\nx\n", 4, []string{"ERR:too long", "x"}},
		{"over max at EOF", strings.Repeat("z", 200<<10), 4, []string{"ERR:" + io.ErrUnexpectedEOF.Error()}},
		{"long lines around short ones", "s\n" + mid + "\nt\n" + big + "\nu\n" + mid + "\n", 4 << 20, []string{"s", mid, "t", big, "u", mid}},
	} {
		for _, rd := range []struct {
			name string
			wrap func(io.Reader) io.Reader
		}{{"whole", func(r io.Reader) io.Reader { return r }}, {"halves", iotest.HalfReader}, {"data+EOF", iotest.DataErrReader}} {
			got := lines(rd.wrap(strings.NewReader(tc.in)), tc.max)
			if len(got) != len(tc.want) {
				t.Errorf("%s (%s): %d lines %v, want %d", tc.name, rd.name, len(got), short(got), len(tc.want))
				continue
			}
			for i := range got {
				if got[i] != tc.want[i] {
					t.Errorf("%s (%s): line %d = %s, want %s", tc.name, rd.name, i, short(got[i:i+1]), short(tc.want[i:i+1]))
				}
			}
		}
	}
}

func short(ls []string) []string {
	var out []string
	for _, l := range ls {
		if len(l) > 20 {
			l = l[:20] + "..."
		}
		out = append(out, l)
	}
	return out
}
