package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
)

// The bbolt file format (version 2) as far as scan reads it.
const (
	boltMagic     = 0xED0CDAED
	boltVersion   = 2
	pageHeader    = 16 // id u64, flags u16, count u16, overflow u32
	elementSize   = 16 // branch: pos, ksize u32, pgid u64; leaf: flags, pos, ksize, vsize u32
	bucketHeader  = 16 // root pgid u64, sequence u64
	branchPage    = 0x01
	leafPage      = 0x02
	freelistPage  = 0x10
	bucketLeaf    = 0x01
	noFreelist    = ^uint64(0)
	minPageSize   = 512
	maxPageSize   = 1 << 20
	metaChecksum  = 56 // the meta fields the checksum covers
	metaFieldsEnd = 64
)

var le = binary.LittleEndian

// scan reads the structure of the bbolt file at path from its bytes, before
// bbolt maps it: the meta pages, the freelist page, and the page tree of
// every bucket. bbolt trusts these, and a damaged one does worse than
// panic: a page that is its own descendant sends its cursor down forever,
// growing its stack until the machine runs out of memory, and a freelist
// count of 2^60 is allocated as is. scan bounds every page id by the high
// water mark, every page by the file, every key and value by its page, and
// visits each page once; what it passes, bbolt can read and check. It
// leaves the rest (order, free pages, reachability) to tx.Check.
func scan(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	s := &scanner{f: f, size: uint64(fi.Size()), seen: map[uint64]bool{}}
	m, err := s.meta()
	if err != nil {
		return err
	}
	s.hwm = m.pgid
	if s.hwm < 3 || s.hwm > s.size/s.ps {
		return fmt.Errorf("high water mark of %d pages of %d bytes does not fit the %d-byte file: truncated?", s.hwm, s.ps, s.size)
	}
	if m.freelist != noFreelist {
		p, err := s.page(m.freelist)
		if err != nil {
			return fmt.Errorf("freelist: %w", err)
		}
		if err := freelist(p); err != nil {
			return fmt.Errorf("freelist page %d: %w", m.freelist, err)
		}
	}
	p, err := s.page(m.root)
	if err != nil {
		return fmt.Errorf("root bucket: %w", err)
	}
	return s.node(p)
}

type scanner struct {
	f        *os.File
	size, ps uint64
	hwm      uint64
	seen     map[uint64]bool
}

type meta struct {
	pageSize, root, freelist, pgid, txid uint64
	ok                                   bool
}

// meta picks the meta page bbolt would: the valid one of the higher txid.
// The page size is the first meta's, or found by trying sizes for the
// second one as bbolt does when the first is damaged.
func (s *scanner) meta() (meta, error) {
	m0 := s.metaAt(0)
	s.ps = m0.pageSize
	for i := 0; !m0.ok && i <= 14; i++ {
		pos := uint64(1024) << i
		if pos+1024 >= s.size {
			break
		}
		if m := s.metaAt(pos); m.ok {
			s.ps = m.pageSize
			break
		}
	}
	if s.ps < minPageSize || s.ps > maxPageSize {
		return meta{}, errors.New("no valid meta page")
	}
	m0, m1 := s.metaAt(0), s.metaAt(s.ps)
	a, b := m0, m1
	if m1.txid > m0.txid {
		a, b = m1, m0
	}
	switch {
	case a.ok:
		return a, nil
	case b.ok:
		return b, nil
	}
	return meta{}, errors.New("no valid meta page")
}

// metaAt reads the meta page at offset pos; ok says it is one (magic,
// version and checksum).
func (s *scanner) metaAt(pos uint64) meta {
	buf := make([]byte, pageHeader+metaFieldsEnd)
	if _, err := s.f.ReadAt(buf, int64(pos)); err != nil {
		return meta{}
	}
	b := buf[pageHeader:]
	sum := fnv.New64a()
	sum.Write(b[:metaChecksum])
	return meta{
		pageSize: uint64(le.Uint32(b[8:])),
		root:     le.Uint64(b[16:]),
		freelist: le.Uint64(b[32:]),
		pgid:     le.Uint64(b[40:]),
		txid:     le.Uint64(b[48:]),
		ok:       le.Uint32(b) == boltMagic && le.Uint32(b[4:]) == boltVersion && le.Uint64(b[56:]) == sum.Sum64(),
	}
}

// page reads page id with its overflow pages, once: a page reached twice
// is a cycle or a shared page, neither of which a sound tree has.
func (s *scanner) page(id uint64) ([]byte, error) {
	if id < 2 || id >= s.hwm {
		return nil, fmt.Errorf("page %d: outside the file's pages 2 to %d", id, s.hwm-1)
	}
	if s.seen[id] {
		return nil, fmt.Errorf("page %d: reached twice", id)
	}
	s.seen[id] = true
	hdr := make([]byte, pageHeader)
	if _, err := s.f.ReadAt(hdr, int64(id*s.ps)); err != nil {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	if got := le.Uint64(hdr); got != id {
		return nil, fmt.Errorf("page %d: says it is page %d", id, got)
	}
	overflow := uint64(le.Uint32(hdr[12:]))
	if id+overflow >= s.hwm {
		return nil, fmt.Errorf("page %d: %d overflow pages run past the last page %d", id, overflow, s.hwm-1)
	}
	buf := make([]byte, (1+overflow)*s.ps)
	if _, err := s.f.ReadAt(buf, int64(id*s.ps)); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("page %d: %w", id, err)
	}
	return buf, nil
}

// node checks a branch or leaf page p (a page of the file, or a bucket
// inlined in its parent's value) and everything below it.
func (s *scanner) node(p []byte) error {
	if len(p) < pageHeader {
		return errors.New("page shorter than its header")
	}
	id, flags, count := le.Uint64(p), le.Uint16(p[8:]), uint64(le.Uint16(p[10:]))
	switch {
	case flags == branchPage && count == 0:
		return fmt.Errorf("page %d: branch page without elements", id)
	case flags != branchPage && flags != leafPage:
		return fmt.Errorf("page %d: neither a branch nor a leaf (flags %#x)", id, flags)
	case pageHeader+count*elementSize > uint64(len(p)):
		return fmt.Errorf("page %d: %d elements overrun the page", id, count)
	}
	for i := range count {
		at := pageHeader + i*elementSize
		e := p[at:]
		switch flags {
		case branchPage:
			pos, ksize := uint64(le.Uint32(e)), uint64(le.Uint32(e[4:]))
			if at+pos+ksize > uint64(len(p)) {
				return fmt.Errorf("page %d: key %d runs past the page", id, i)
			}
			child, err := s.page(le.Uint64(e[8:]))
			if err != nil {
				return fmt.Errorf("page %d: %w", id, err)
			}
			if err := s.node(child); err != nil {
				return err
			}
		case leafPage:
			eflags, pos, ksize, vsize := le.Uint32(e), uint64(le.Uint32(e[4:])), uint64(le.Uint32(e[8:])), uint64(le.Uint32(e[12:]))
			end := at + pos + ksize + vsize
			if end > uint64(len(p)) {
				return fmt.Errorf("page %d: element %d runs past the page", id, i)
			}
			if eflags&bucketLeaf == 0 {
				continue
			}
			v := p[at+pos+ksize : end]
			if len(v) < bucketHeader {
				return fmt.Errorf("page %d: bucket %d: header cut short", id, i)
			}
			if root := le.Uint64(v); root != 0 {
				child, err := s.page(root)
				if err != nil {
					return fmt.Errorf("page %d: bucket %d: %w", id, i, err)
				}
				if err := s.node(child); err != nil {
					return err
				}
			} else if err := s.node(v[bucketHeader:]); err != nil { // inline
				return fmt.Errorf("page %d: inline bucket %d: %w", id, i, err)
			}
		}
	}
	return nil
}

// freelist checks that the freelist page holds the ids it counts.
func freelist(p []byte) error {
	if flags := le.Uint16(p[8:]); flags != freelistPage {
		return fmt.Errorf("not a freelist page (flags %#x)", flags)
	}
	room := (uint64(len(p)) - pageHeader) / 8
	count := uint64(le.Uint16(p[10:]))
	if count == 0xFFFF { // the real count is the first element
		if room == 0 {
			return errors.New("count cut short")
		}
		count, room = le.Uint64(p[pageHeader:]), room-1
	}
	if count > room {
		return fmt.Errorf("%d ids counted, room for %d", count, room)
	}
	return nil
}
