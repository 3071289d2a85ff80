package proc

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
)

// parseProcArgs parses the buffer macOS's sysctl kern.procargs2 returns:
// argc as a native-endian int32, the executable path NUL-terminated, NUL
// padding, argc NUL-terminated arguments, then the environment strings up
// to an empty string (after which come the "apple" strings the loader
// reads, which are not environment). It lives in a portable file so its
// tests run everywhere.
//
// The padding cannot be told from an empty argv[0] (ps and every other
// reader of this sysctl share the ambiguity); an empty argument later on is
// kept. A buffer cut short inside the arguments is an error; an
// environment string left unterminated at the end is dropped rather than
// returned cut, since a truncated marker value would name the wrong owner.
func parseProcArgs(b []byte) (argv, env []string, err error) {
	if len(b) < 4 {
		return nil, nil, fmt.Errorf("%d bytes, too short for argc", len(b))
	}
	argc := int(int32(binary.NativeEndian.Uint32(b)))
	rest := b[4:]
	// Each argument takes at least its NUL, which bounds a sane argc.
	if argc < 0 || argc > len(rest) {
		return nil, nil, fmt.Errorf("argc %d out of range for %d bytes", argc, len(b))
	}
	i := bytes.IndexByte(rest, 0)
	if i < 0 {
		return nil, nil, errors.New("executable path is not terminated")
	}
	rest = bytes.TrimLeft(rest[i:], "\x00")
	if argc > 0 {
		argv = make([]string, 0, argc)
	}
	for len(argv) < argc {
		j := bytes.IndexByte(rest, 0)
		if j < 0 {
			return nil, nil, fmt.Errorf("arguments cut short after %d of %d", len(argv), argc)
		}
		argv = append(argv, string(rest[:j]))
		rest = rest[j+1:]
	}
	for {
		j := bytes.IndexByte(rest, 0)
		if j <= 0 { // end of buffer, unterminated tail, or the empty string
			return argv, env, nil
		}
		env = append(env, string(rest[:j]))
		rest = rest[j+1:]
	}
}
