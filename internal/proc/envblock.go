package proc

import "unicode/utf16"

// This file holds the pure decoding behind Cmdline and Environ on Windows,
// where both are read as raw UTF-16LE bytes out of another process's
// memory. It carries no build tag so its tests run on every CI host.

// utf16LE turns little-endian bytes into UTF-16 code units. A trailing odd
// byte (a read cut short mid-unit) is dropped.
func utf16LE(b []byte) []uint16 {
	u := make([]uint16, len(b)/2)
	for i := range u {
		u[i] = uint16(b[2*i]) | uint16(b[2*i+1])<<8
	}
	return u
}

// decodeUTF16LE decodes a UTF-16LE string that has an explicit length (a
// UNICODE_STRING's buffer: no terminator). Unpaired surrogates become
// U+FFFD, as everywhere in Go.
func decodeUTF16LE(b []byte) string {
	return string(utf16.Decode(utf16LE(b)))
}

// decodeEnvBlock splits a Windows environment block (UTF-16LE "K=V\0" entries
// ended by an empty entry, i.e. a double NUL) into KEY=VALUE strings, in
// order. The block ends at the first empty entry; anything after it is
// allocation slack. An entry with no NUL after it was cut off by a short
// read and is dropped rather than returned half: a truncated marker value
// would name the wrong process. The per-drive "=C:=C:\dir" entries are kept,
// as os.Environ keeps them.
func decodeEnvBlock(b []byte) []string {
	u := utf16LE(b)
	var out []string
	for len(u) > 0 {
		end := -1
		for i, c := range u {
			if c == 0 {
				end = i
				break
			}
		}
		if end <= 0 { // no terminator (truncated) or the empty entry (end of block)
			break
		}
		out = append(out, string(utf16.Decode(u[:end])))
		u = u[end+1:]
	}
	return out
}
